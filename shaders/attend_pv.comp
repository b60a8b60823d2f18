// Decode attention, pass 2 (attention.h, "Two-pass decode"): softmax over the scores and the
// weighted sum of V rows. Bindings: 0 step, 1 scores [n_q, key_stride] and 4 stats [n_q,
// score_groups, 2] (pass 1), 2 v_cache [slots, n_kv, d], 3 out [n_q, d], 5 scratch (partials
// [pv split, n_q, d]), 6 counters (uint per (x, z), zero between dispatches).
// Spec: LOCAL_SIZE (a multiple of DCHUNK), ROWS = heads_per_group, DCHUNK output dims per
// workgroup, PV_UNROLL V rows per invocation a round, KV_MODE.
// Workgroup (x, y, z): dims [x·DCHUNK, ..), the y-th key range, the heads of one KV head's
// group. Invocation (dim lane, key lane): per round each loads PV_UNROLL V rows' values of its
// dim (key lanes apart, DCHUNK lanes read a row piece together: coalesced) before the round's
// probabilities are computed into shared memory, so V and score loads are in flight together;
// the key lanes' sums meet in shared memory at the end. The softmax's max and sum come from
// pass 1's block stats (a few per head, not every score), so a range needs only its own keys.
// Several ranges: each writes its partial (already divided by the global sum), and the last to
// count itself in (acquire/release at device scope, GL_KHR_memory_scope_semantics) adds them
// in range order into out and resets the counter for the next replay.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_control_flow_attributes : require

#define INFER_ATTN_DECODE
#include "attention.h"
#include "step.h"

layout(local_size_x_id = INFER_ATTN_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_ATTN_SPEC_ROWS) const uint kHeads = 8;
layout(constant_id = INFER_ATTN_SPEC_DCHUNK) const uint kDChunk = 32;
layout(constant_id = INFER_ATTN_SPEC_PV_UNROLL) const uint kUnroll = 8;

layout(binding = 0, std430) readonly buffer Step { uint step[]; };
layout(binding = 1, std430) readonly buffer Scores { float scores[]; };
layout(binding = 2, std430) readonly buffer VCache { float v_cache[]; };
layout(binding = 3, std430) writeonly buffer Out { float out_rows[]; };
layout(binding = 4, std430) readonly buffer Stats { float stats[]; };
layout(binding = 5, std430) coherent buffer Scratch { float scratch[]; };
layout(binding = 6, std430) coherent buffer Counters { uint counters[]; };

#include "common/kv_ring.glsl"

const float kNone = -3.0e38;  // the running max before any block: finite, so no inf - inf
const uint kKeyLanes = gl_WorkGroupSize.x / kDChunk;
const uint kRound = kKeyLanes * kUnroll;  // keys a round

shared float m_sh[kHeads];    // max score of each head
shared float inv_sh[kHeads];  // 1 / sum of exp(score - max)
shared float p_sh[kHeads * kRound];
shared float acc_sh[gl_WorkGroupSize.x * kHeads];  // [key lane][head][dim lane]
shared bool last_sh;                               // this workgroup adds the partials up

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint d = pc.d;
  const uint group = pc.n_q / pc.n_kv;
  const uint head_groups = (group + pc.heads_per_group - 1) / pc.heads_per_group;
  const uint kvh = gl_WorkGroupID.z / head_groups;
  const uint h0 = kvh * group + (gl_WorkGroupID.z % head_groups) * pc.heads_per_group;
  const uint n_heads = min(pc.heads_per_group, (kvh + 1) * group - h0);

  const uint p = kv_cache_pos0();
  const uint lo = (pc.window > 0 && p + 1 > pc.window) ? p + 1 - pc.window : 0;
  const uint n_keys = p + 1 - lo;
  // Pass 1's blocks (the same arithmetic as attend_scores), and this workgroup's key range.
  const uint per_block = ((n_keys + pc.score_groups - 1) / pc.score_groups + pc.score_block - 1) /
                         pc.score_block * pc.score_block;
  const uint n_blocks = (n_keys + per_block - 1) / per_block;
  const uint per_split = max((n_keys + pc.pv_splits - 1) / pc.pv_splits, pc.pv_min_keys);
  const uint n_active = (n_keys + per_split - 1) / per_split;  // ranges with keys
  const uint split = gl_WorkGroupID.y;
  if (split >= n_active) return;  // uniform: the whole workgroup leaves
  const uint k0 = split * per_split, k1 = min(k0 + per_split, n_keys);

  // Softmax statistics: subgroup per head, lanes merge blocks online, then across lanes.
  for (uint h = gl_SubgroupID; h < n_heads; h += gl_NumSubgroups) {
    const uint row = (h0 + h) * pc.score_groups;
    float m = kNone, l = 0.0;
    for (uint b = gl_SubgroupInvocationID; b < n_blocks; b += gl_SubgroupSize) {
      const float mb = stats[(row + b) * 2], lb = stats[(row + b) * 2 + 1];
      const float m_new = max(m, mb);
      l = l * exp(m - m_new) + lb * exp(mb - m_new);
      m = m_new;
    }
    const float mx = subgroupMax(m);
    const float sum = subgroupAdd(l * exp(m - mx));  // lanes without blocks add 0
    if (subgroupElect()) {
      m_sh[h] = mx;
      inv_sh[h] = 1.0 / sum;
    }
  }

  const uint dim_lane = lid % kDChunk, key_lane = lid / kDChunk;
  const uint j = gl_WorkGroupID.x * kDChunk + dim_lane;  // this invocation's output dim
  const uint jc = min(j, d - 1);  // past d: a valid element, never written
  const uint kv_stride = pc.n_kv * d, kv_off = kvh * d;
  float acc[kHeads];
  [[unroll]] for (uint h = 0; h < kHeads; ++h) acc[h] = 0.0;
  for (uint base = k0; base < k1; base += kRound) {  // uniform in the workgroup
    float vv[kUnroll];
    [[unroll]] for (uint u = 0; u < kUnroll; ++u) {
      const uint k = min(base + key_lane + u * kKeyLanes, k1 - 1);  // past k1: p = 0 below
      vv[u] = v_cache[kv_slot(lo + k, pc.slots) * kv_stride + kv_off + jc];
    }
    barrier();  // the statistics are in; the previous round's probabilities are used
    const uint p_per = (kHeads * kRound + gl_WorkGroupSize.x - 1) / gl_WorkGroupSize.x;
    [[unroll]] for (uint u = 0; u < p_per; ++u) {
      const uint i = lid + u * gl_WorkGroupSize.x;
      if (i >= kHeads * kRound) break;
      const uint h = i / kRound, k = base + i % kRound;
      p_sh[i] = (h < n_heads && k < k1)
                    ? exp(scores[(h0 + h) * pc.key_stride + k] - m_sh[h]) * inv_sh[h]
                    : 0.0;
    }
    barrier();
    [[unroll]] for (uint u = 0; u < kUnroll; ++u) {
      [[unroll]] for (uint h = 0; h < kHeads; ++h) {
        acc[h] += p_sh[h * kRound + key_lane + u * kKeyLanes] * vv[u];
      }
    }
  }
  [[unroll]] for (uint h = 0; h < kHeads; ++h) {
    acc_sh[(key_lane * kHeads + h) * kDChunk + dim_lane] = acc[h];
  }
  barrier();
  const bool direct = n_active == 1;
  for (uint i = lid; i < kHeads * kDChunk; i += gl_WorkGroupSize.x) {
    const uint h = i / kDChunk, jj = gl_WorkGroupID.x * kDChunk + i % kDChunk;
    if (h >= n_heads || jj >= d) continue;
    float o = 0.0;
    for (uint l = 0; l < kKeyLanes; ++l) o += acc_sh[(l * kHeads + h) * kDChunk + i % kDChunk];
    if (direct) {
      out_rows[(h0 + h) * d + jj] = o;
    } else {
      scratch[(split * pc.n_q + h0 + h) * d + jj] = o;
    }
  }
  if (direct) return;

  // Count this range in; the last of the n_active adds the partials up. The release barrier
  // orders every invocation's partial writes before invocation 0's device-scope atomic; the
  // acquire one after it makes the other ranges' partials visible to the whole workgroup.
  controlBarrier(gl_ScopeWorkgroup, gl_ScopeDevice, gl_StorageSemanticsBuffer,
                 gl_SemanticsAcquireRelease);
  if (lid == 0) {
    const uint counter = gl_WorkGroupID.x * gl_NumWorkGroups.z + gl_WorkGroupID.z;
    const uint before = atomicAdd(counters[counter], 1u, gl_ScopeDevice,
                                  gl_StorageSemanticsBuffer, gl_SemanticsAcquireRelease);
    last_sh = before == n_active - 1;
    // Every range has counted: reset for the next replay (ordered after this dispatch by the
    // recorder's barrier).
    if (last_sh) {
      atomicStore(counters[counter], 0u, gl_ScopeDevice, gl_StorageSemanticsBuffer,
                  gl_SemanticsRelaxed);
    }
  }
  controlBarrier(gl_ScopeWorkgroup, gl_ScopeDevice,
                 gl_StorageSemanticsBuffer | gl_StorageSemanticsShared,
                 gl_SemanticsAcquireRelease);
  if (!last_sh) return;
  for (uint i = lid; i < kHeads * kDChunk; i += gl_WorkGroupSize.x) {
    const uint h = i / kDChunk, jj = gl_WorkGroupID.x * kDChunk + i % kDChunk;
    if (h >= n_heads || jj >= d) continue;
    const uint at = (h0 + h) * d + jj, split_stride = pc.n_q * d;
    // Four partials loaded before they are added (in range order either way).
    float o = 0.0;
    uint s = 0;
    for (; s + 4 <= n_active; s += 4) {
      const float a = scratch[s * split_stride + at], b = scratch[(s + 1) * split_stride + at];
      const float c = scratch[(s + 2) * split_stride + at];
      const float e = scratch[(s + 3) * split_stride + at];
      o += a;
      o += b;
      o += c;
      o += e;
    }
    for (; s < n_active; ++s) o += scratch[s * split_stride + at];
    out_rows[at] = o;
  }
}
