// Decode attention, pass 2 (attention.h, "Decode"): softmax over the scores and the weighted
// sum of V rows. Bindings: 0 step, 1 scores [n_q, key_stride] (pass 1), 2 v_cache [slots,
// n_kv, d], 3 out [n_q, d]. Workgroup x: output dims [x·DCHUNK, (x+1)·DCHUNK); z: the heads of
// one KV head's group, as in pass 1. Invocation (dim lane, key lane): dim lanes read a row's
// DCHUNK floats together (coalesced), key lanes take every key_lanes-th key of a tile so many
// V rows are in flight; the key lanes' sums meet in shared memory at the end.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#define INFER_ATTN_DECODE
#include "attention.h"
#include "step.h"

layout(local_size_x_id = INFER_ATTN_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_ATTN_SPEC_ROWS) const uint kHeads = 8;
layout(constant_id = INFER_ATTN_SPEC_DCHUNK) const uint kDChunk = 32;
layout(constant_id = INFER_ATTN_SPEC_KEY_TILE) const uint kTile = 256;

layout(binding = 0, std430) readonly buffer Step { uint step[]; };
layout(binding = 1, std430) readonly buffer Scores { float scores[]; };
layout(binding = 2, std430) readonly buffer VCache { float v_cache[]; };
layout(binding = 3, std430) writeonly buffer Out { float out_rows[]; };

#include "common/kv_ring.glsl"

const uint kUnroll = 8;

shared float m_sh[kHeads];    // max score of each head
shared float inv_sh[kHeads];  // 1 / sum of exp(score - max)
shared float p_sh[kHeads * kTile];
// Partial sums of each key lane, [key lane][head][dim].
shared float acc_sh[gl_WorkGroupSize.x * kHeads];

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint d = pc.d;
  const uint group = pc.n_q / pc.n_kv;
  const uint head_groups = (group + pc.heads_per_group - 1) / pc.heads_per_group;
  const uint kvh = gl_WorkGroupID.z / head_groups;
  const uint h0 = kvh * group + (gl_WorkGroupID.z % head_groups) * pc.heads_per_group;
  const uint n_heads = min(pc.heads_per_group, (kvh + 1) * group - h0);

  const uint p = kv_cache_pos0(pc.mode);
  const uint lo = (pc.window > 0 && p + 1 > pc.window) ? p + 1 - pc.window : 0;
  const uint n_keys = p + 1 - lo;

  // Softmax statistics: subgroup per head.
  for (uint h = gl_SubgroupID; h < n_heads; h += gl_NumSubgroups) {
    const uint row = (h0 + h) * pc.key_stride;
    float mx = -3.0e38;
    for (uint i = gl_SubgroupInvocationID; i < n_keys; i += gl_SubgroupSize) {
      mx = max(mx, scores[row + i]);
    }
    mx = subgroupMax(mx);
    float sum = 0.0;
    for (uint i = gl_SubgroupInvocationID; i < n_keys; i += gl_SubgroupSize) {
      sum += exp(scores[row + i] - mx);
    }
    sum = subgroupAdd(sum);
    if (subgroupElect()) {
      m_sh[h] = mx;
      inv_sh[h] = 1.0 / sum;
    }
  }

  const uint key_lanes = gl_WorkGroupSize.x / kDChunk;
  const uint dim_lane = lid % kDChunk, key_lane = lid / kDChunk;
  const uint j = gl_WorkGroupID.x * kDChunk + dim_lane;  // this invocation's output dim
  const uint kv_stride = pc.n_kv * d, kv_off = kvh * d;
  float acc[kHeads];
  for (uint h = 0; h < kHeads; ++h) acc[h] = 0.0;
  for (uint base = 0; base < n_keys; base += kTile) {
    const uint n_tile = min(kTile, n_keys - base);
    barrier();  // the statistics are in; the previous tile's probabilities are used
    for (uint i = lid; i < kHeads * kTile; i += gl_WorkGroupSize.x) {
      const uint h = i / kTile, k = i % kTile;
      p_sh[i] = (h < n_heads && k < n_tile)
                    ? exp(scores[(h0 + h) * pc.key_stride + base + k] - m_sh[h]) * inv_sh[h]
                    : 0.0;
    }
    barrier();
    if (j < d) {
      // kUnroll rows loaded before any is used, so that many loads are in flight per lane.
      uint k = key_lane;
      for (; k + (kUnroll - 1) * key_lanes < n_tile; k += kUnroll * key_lanes) {
        float vv[kUnroll];
        for (uint u = 0; u < kUnroll; ++u) {
          vv[u] = v_cache[kv_slot(pc.mode, lo + base + k + u * key_lanes, pc.slots) * kv_stride +
                          kv_off + j];
        }
        for (uint u = 0; u < kUnroll; ++u) {
          for (uint h = 0; h < kHeads; ++h) acc[h] += p_sh[h * kTile + k + u * key_lanes] * vv[u];
        }
      }
      for (; k < n_tile; k += key_lanes) {
        const uint slot = kv_slot(pc.mode, lo + base + k, pc.slots);
        const float vv = v_cache[slot * kv_stride + kv_off + j];
        for (uint h = 0; h < kHeads; ++h) acc[h] += p_sh[h * kTile + k] * vv;
      }
    }
  }
  for (uint h = 0; h < kHeads; ++h) acc_sh[(key_lane * kHeads + h) * kDChunk + dim_lane] = acc[h];
  barrier();
  for (uint i = lid; i < kHeads * kDChunk; i += gl_WorkGroupSize.x) {
    const uint h = i / kDChunk, jj = gl_WorkGroupID.x * kDChunk + i % kDChunk;
    if (h >= n_heads || jj >= d) continue;
    float o = 0.0;
    for (uint l = 0; l < key_lanes; ++l) o += acc_sh[(l * kHeads + h) * kDChunk + i % kDChunk];
    out_rows[(h0 + h) * d + jj] = o;
  }
}
