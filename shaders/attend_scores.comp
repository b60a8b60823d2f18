// Decode attention, pass 1 (attention.h, "Two-pass decode"): scores of the token's query heads
// against a block of keys, and each head's softmax statistics over the block. Bindings: 0 step
// (step.h), 1 q [n_q, d] (normed, rotated), 2 k_cache [slots, n_kv, d] (key s at row
// kv_slot(s), common/kv_ring.glsl), 3 scores [n_q, key_stride], 4 inv_freq [d/2] (ring modes
// rotate keys at their cache position as they load them), 5 stats [n_q, score_groups, 2].
// Spec: LOCAL_SIZE, MAX_SUBGROUPS >= gl_NumSubgroups, ROWS = heads_per_group, MAX_D = d (one
// pipeline per head dim: the d loops have constant trip counts and unroll), KEYS_PER_SUBGROUP,
// D_CHUNKS = ceil(d / smallest subgroup size), KV_MODE.
// Workgroup x: keys [x·per, (x+1)·per) (per from the push, as attend_pv computes it); z: the
// heads of one KV head's group. Each subgroup takes KEYS_PER_SUBGROUP keys a round (lanes over
// d, coalesced), loads all their elements into registers before the first product, so one
// memory latency serves the round (the first round's loads also overlap the staging of q),
// and reduces with subgroupAdd; the next round's loads go out before this round's stores.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require

#define INFER_ATTN_DECODE
#include "attention.h"
#include "step.h"

layout(local_size_x_id = INFER_ATTN_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_ATTN_SPEC_MAX_SUBGROUPS) const uint kMaxSubgroups = 32;
layout(constant_id = INFER_ATTN_SPEC_ROWS) const uint kHeads = 8;
layout(constant_id = INFER_ATTN_SPEC_MAX_D) const uint kD = 512;
layout(constant_id = INFER_ATTN_SPEC_KEYS_PER_SUBGROUP) const uint kKeys = 2;
layout(constant_id = INFER_ATTN_SPEC_D_CHUNKS) const uint kChunks = 16;

layout(binding = 0, std430) readonly buffer Step { uint step[]; };
layout(binding = 1, std430) readonly buffer Q { float q[]; };
layout(binding = 2, std430) readonly buffer KCache { float k_cache[]; };
layout(binding = 3, std430) writeonly buffer Scores { float scores[]; };
layout(binding = 4, std430) readonly buffer InvFreq { float inv_freq[]; };  // ring modes: [d/2]
layout(binding = 5, std430) writeonly buffer Stats { float stats[]; };

#define INFER_KV_ROTATE_KEYS
#include "common/rope.glsl"
#include "common/kv_ring.glsl"

// The running max before any key: finite, so no inf - inf.
const float kNone = -3.0e38;

shared float q_sh[kHeads * kD];
shared float m_sh[kMaxSubgroups * kHeads];  // each subgroup's running max per head
shared float l_sh[kMaxSubgroups * kHeads];  // and sum of exp(score - max)

// This lane's elements (e = lane + c · subgroup size) of the round's keys: kv[j · kChunks + c].
// (A global, not an out parameter: glslc cannot pass arrays sized by spec constants.)
float kv[kKeys * kChunks];

// Loads kv for keys first .. first + kKeys - 1 of KV head row offset kv_off; keys past `end`
// load key end - 1 (a valid row, never used), and elements past d are 0. No branch on the
// data: every load can be in flight at once.
void load_keys(uint first, uint end, uint lo, uint kv_off) {
  [[unroll]] for (uint j = 0; j < kKeys; ++j) {
    const uint s = lo + min(first + j, end - 1);
    const uint row = kv_slot(s, pc.slots) * pc.n_kv * kD + kv_off;
    [[unroll]] for (uint c = 0; c < kChunks; ++c) {
      const uint e = gl_SubgroupInvocationID + c * gl_SubgroupSize;
      const float x = kv_key(row, min(e, kD - 1), kD, s);
      kv[j * kChunks + c] = e < kD ? x : 0.0;
    }
  }
}

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint group = pc.n_q / pc.n_kv;
  const uint head_groups = (group + pc.heads_per_group - 1) / pc.heads_per_group;
  const uint kvh = gl_WorkGroupID.z / head_groups;
  const uint h0 = kvh * group + (gl_WorkGroupID.z % head_groups) * pc.heads_per_group;
  const uint n_heads = min(pc.heads_per_group, (kvh + 1) * group - h0);

  const uint p = kv_cache_pos0();  // the token's cache position
  const uint lo = (pc.window > 0 && p + 1 > pc.window) ? p + 1 - pc.window : 0;
  const uint n_keys = p + 1 - lo;
  const uint per = ((n_keys + pc.score_groups - 1) / pc.score_groups + pc.score_block - 1) /
                   pc.score_block * pc.score_block;
  const uint k_begin = gl_WorkGroupID.x * per;
  if (k_begin >= n_keys) return;  // uniform: past the keys this token sees
  const uint k_end = min(k_begin + per, n_keys);
  const uint kv_off = kvh * kD;
  const uint round = gl_NumSubgroups * kKeys;

  uint first = k_begin + gl_SubgroupID * kKeys;
  load_keys(first, k_end, lo, kv_off);  // in flight while q is staged
  const uint q_per = (kHeads * kD + gl_WorkGroupSize.x - 1) / gl_WorkGroupSize.x;  // constant
  [[unroll]] for (uint u = 0; u < q_per; ++u) {
    const uint i = lid + u * gl_WorkGroupSize.x;
    if (i < kHeads * kD) q_sh[i] = i / kD < n_heads ? q[h0 * kD + i] : 0.0;
  }
  barrier();

  float m_run[kHeads], l_run[kHeads];  // uniform in the subgroup
  [[unroll]] for (uint h = 0; h < kHeads; ++h) {
    m_run[h] = kNone;
    l_run[h] = 0.0;
  }
  for (; first < k_end; first += round) {  // uniform in the subgroup
    float dot[kKeys * kHeads];
    [[unroll]] for (uint i = 0; i < kKeys * kHeads; ++i) dot[i] = 0.0;
    [[unroll]] for (uint c = 0; c < kChunks; ++c) {
      const uint e = min(gl_SubgroupInvocationID + c * gl_SubgroupSize, kD - 1);
      [[unroll]] for (uint h = 0; h < kHeads; ++h) {
        const float qv = q_sh[h * kD + e];
        [[unroll]] for (uint j = 0; j < kKeys; ++j) {
          dot[j * kHeads + h] += qv * kv[j * kChunks + c];
        }
      }
    }
    if (first + round < k_end) load_keys(first + round, k_end, lo, kv_off);
    [[unroll]] for (uint h = 0; h < kHeads; ++h) {
      float total[kKeys];
      float m_round = kNone;
      [[unroll]] for (uint j = 0; j < kKeys; ++j) {
        total[j] = subgroupAdd(dot[j * kHeads + h]);
        const bool live = first + j < k_end;
        if (live) m_round = max(m_round, total[j]);
        if (subgroupElect() && live && h < n_heads) {
          scores[(h0 + h) * pc.key_stride + first + j] = total[j];
        }
      }
      const float m_new = max(m_run[h], m_round);
      float l = l_run[h] * exp(m_run[h] - m_new);  // 0 while m_run is kNone
      [[unroll]] for (uint j = 0; j < kKeys; ++j) {
        if (first + j < k_end) l += exp(total[j] - m_new);
      }
      m_run[h] = m_new;
      l_run[h] = l;
    }
  }

  // The block's statistics: the subgroups' running pairs merged per head.
  if (subgroupElect()) {
    [[unroll]] for (uint h = 0; h < kHeads; ++h) {
      m_sh[gl_SubgroupID * kHeads + h] = m_run[h];
      l_sh[gl_SubgroupID * kHeads + h] = l_run[h];
    }
  }
  barrier();
  if (lid < n_heads) {
    float m = kNone;
    for (uint s = 0; s < gl_NumSubgroups; ++s) m = max(m, m_sh[s * kHeads + lid]);
    float l = 0.0;
    for (uint s = 0; s < gl_NumSubgroups; ++s) {
      l += l_sh[s * kHeads + lid] * exp(m_sh[s * kHeads + lid] - m);
    }
    const uint at = ((h0 + lid) * pc.score_groups + gl_WorkGroupID.x) * 2;
    stats[at] = m;
    stats[at + 1] = l;
  }
}
