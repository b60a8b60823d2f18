// Decode attention, pass 1 (attention.h, "Decode"): scores of the token's query heads against
// a block of keys. Bindings: 0 step (step.h), 1 q [n_q, d] (normed, rotated), 2 k_cache
// [slots, n_kv, d] (key s at row kv_slot(s), common/kv_ring.glsl), 3 scores [n_q, key_stride],
// 4 inv_freq [d/2] (ring modes rotate keys at their cache position as they load them).
// Workgroup x: keys [x·block, (x+1)·block), block = subgroups · KEYS_PER_SUBGROUP; z: the
// heads_per_group query heads of one KV head's group. Each subgroup loads its keys' rows at
// once (lanes over d, coalesced) so several rows are in flight, and reduces with subgroupAdd.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#define INFER_ATTN_DECODE
#include "attention.h"
#include "step.h"

layout(local_size_x_id = INFER_ATTN_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_ATTN_SPEC_ROWS) const uint kHeads = 8;
layout(constant_id = INFER_ATTN_SPEC_MAX_D) const uint kMaxD = 512;
layout(constant_id = INFER_ATTN_SPEC_KEYS_PER_SUBGROUP) const uint kKeys = 2;
layout(constant_id = INFER_ATTN_SPEC_D_CHUNKS) const uint kChunks = 16;

layout(binding = 0, std430) readonly buffer Step { uint step[]; };
layout(binding = 1, std430) readonly buffer Q { float q[]; };
layout(binding = 2, std430) readonly buffer KCache { float k_cache[]; };
layout(binding = 3, std430) writeonly buffer Scores { float scores[]; };
layout(binding = 4, std430) readonly buffer InvFreq { float inv_freq[]; };  // ring modes: [d/2]

#define INFER_KV_ROTATE_KEYS
#include "common/rope.glsl"
#include "common/kv_ring.glsl"

shared float q_sh[kHeads * kMaxD];

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint d = pc.d;
  const uint group = pc.n_q / pc.n_kv;
  const uint head_groups = (group + pc.heads_per_group - 1) / pc.heads_per_group;
  const uint kvh = gl_WorkGroupID.z / head_groups;
  const uint h0 = kvh * group + (gl_WorkGroupID.z % head_groups) * pc.heads_per_group;
  const uint n_heads = min(pc.heads_per_group, (kvh + 1) * group - h0);

  const uint p = kv_cache_pos0(pc.mode);  // the token's cache position
  const uint lo = (pc.window > 0 && p + 1 > pc.window) ? p + 1 - pc.window : 0;
  const uint n_keys = p + 1 - lo;
  const uint block = gl_NumSubgroups * kKeys;
  if (gl_WorkGroupID.x * block >= n_keys) return;  // uniform: past the keys this token sees

  for (uint i = lid; i < kHeads * d; i += gl_WorkGroupSize.x) {
    const uint h = i / d, e = i % d;
    q_sh[h * kMaxD + e] = h < n_heads ? q[(h0 + h) * d + e] : 0.0;
  }
  barrier();

  const uint first = gl_WorkGroupID.x * block + gl_SubgroupID * kKeys;
  const uint kv_stride = pc.n_kv * d, kv_off = kvh * d;
  float dot[kKeys * kHeads];
  for (uint i = 0; i < kKeys * kHeads; ++i) dot[i] = 0.0;
  for (uint c = 0; c < kChunks; ++c) {
    const uint e = gl_SubgroupInvocationID + c * gl_SubgroupSize;
    if (e >= d) break;
    float kv[kKeys];
    for (uint j = 0; j < kKeys; ++j) {
      const uint i = min(first + j, n_keys - 1);  // past the end: a valid row, never written
      kv[j] = kv_key(kv_slot(pc.mode, lo + i, pc.slots) * kv_stride + kv_off, e, d, lo + i,
                     pc.mode != INFER_KV_EXACT);
    }
    for (uint h = 0; h < kHeads; ++h) {
      const float qv = q_sh[h * kMaxD + e];
      for (uint j = 0; j < kKeys; ++j) dot[j * kHeads + h] += qv * kv[j];
    }
  }
  for (uint j = 0; j < kKeys; ++j) {
    for (uint h = 0; h < kHeads; ++h) {
      const float total = subgroupAdd(dot[j * kHeads + h]);
      const uint i = first + j;
      if (subgroupElect() && h < n_heads && i < n_keys) {
        scores[(h0 + h) * pc.key_stride + i] = total;
      }
    }
  }
}
