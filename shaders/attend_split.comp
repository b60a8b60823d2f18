// Decode attention (T = 1) in one dispatch: flash-decoding, split over keys, merged by the last
// workgroup (attention.h, "Split decode"). Bindings as attend.comp: 0 step, 1 q [n_q, d]
// (normed, rotated), 2 k_cache, 3 v_cache [slots, n_kv, d] (key s at row kv_slot(s)), 4 out
// [n_q, d], 5 scratch (partials), 6 counters, 7 inv_freq [d/2] (ring modes rotate keys on load).
// Workgroup (x = slice of LOCAL_SIZE output dims, y = split, z = the heads_per_group query
// heads of one KV head): the keys [lo, p] the token sees are cut at run time into splits of
// >= min_keys keys (whole tiles); workgroups past the last split leave at once. Every slice of
// a split computes the same scores (its K rows come from L2 for all but the first: x varies
// fastest, so they run together) and adds p · V into its own dims, one per invocation: the
// merge is spread over the slices too, each reading splits x heads x LOCAL_SIZE partials.
// Per tile of TILE keys: each invocation first loads its dim of the tile's V rows (in flight
// while the scores are computed), then subgroups take KEYS_PER_SUBGROUP keys each (lanes over
// d, the keys' loads issued together, subgroupAdd), a subgroup per head updates the running
// max and sum, and the invocations add the probabilities times the V values they hold.
// The last split to finish (an atomic counter per (slice, head group), acquire/release at
// device scope, GL_KHR_memory_scope_semantics) merges and resets the counter for the next
// replay, so no second dispatch or pipeline barrier. Scores unscaled, softmax in f32.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_memory_scope_semantics : require

#define INFER_ATTN_ATTEND
#include "attention.h"
#include "step.h"

layout(local_size_x_id = INFER_ATTN_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_ATTN_SPEC_ROWS) const uint kHeads = 8;
layout(constant_id = INFER_ATTN_SPEC_TILE) const uint kTile = 32;
layout(constant_id = INFER_ATTN_SPEC_MAX_D) const uint kMaxD = 512;
layout(constant_id = INFER_ATTN_SPEC_KEYS_PER_SUBGROUP) const uint kKeys = 8;
layout(constant_id = INFER_ATTN_SPEC_D_CHUNKS) const uint kChunks = 16;

layout(binding = 0, std430) readonly buffer Step { uint step[]; };
layout(binding = 1, std430) readonly buffer Q { float q[]; };
layout(binding = 2, std430) readonly buffer KCache { float k_cache[]; };
layout(binding = 3, std430) readonly buffer VCache { float v_cache[]; };
layout(binding = 4, std430) writeonly buffer Out { float out_rows[]; };
layout(binding = 5, std430) coherent buffer Scratch { float scratch[]; };
layout(binding = 6, std430) coherent buffer Counters { uint counters[]; };
layout(binding = 7, std430) readonly buffer InvFreq { float inv_freq[]; };  // ring modes: [d/2]

#define INFER_KV_ROTATE_KEYS
#include "common/rope.glsl"
#include "common/kv_ring.glsl"

// A masked score and the running max before any key: finite, so no inf - inf.
const float kMasked = -3.0e38;

shared float q_sh[kHeads * kMaxD];
shared float p_sh[kHeads * kTile];  // scores, then probabilities, of the current tile
shared float m_sh[kHeads];          // running max
shared float l_sh[kHeads];          // running sum of exp(score - max)
shared float alpha_sh[kHeads];      // rescale of the output for the current tile
shared float w_sh[kHeads * INFER_ATTN_MAX_SPLITS];  // merge: weight of each split's partial
shared bool last_sh;                                // this workgroup merges

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint d = pc.d;
  const uint group = pc.n_q / pc.n_kv;  // query heads per KV head (GQA, contiguous)
  const uint head_groups = (group + pc.heads_per_group - 1) / pc.heads_per_group;
  const uint kvh = gl_WorkGroupID.z / head_groups;
  const uint h0 = kvh * group + (gl_WorkGroupID.z % head_groups) * pc.heads_per_group;
  const uint n_heads = min(pc.heads_per_group, (kvh + 1) * group - h0);
  const uint j = gl_WorkGroupID.x * gl_WorkGroupSize.x + lid;  // this invocation's output dim
  const bool has_dim = j < d;

  const uint p = kv_cache_pos0();  // the token's cache position
  const uint lo = (pc.window > 0 && p + 1 > pc.window) ? p + 1 - pc.window : 0;
  const uint n_keys = p + 1 - lo;
  const uint per_split =
      (max((n_keys + pc.n_splits - 1) / pc.n_splits, pc.min_keys) + kTile - 1) / kTile * kTile;
  const uint n_active = (n_keys + per_split - 1) / per_split;  // splits with keys, <= n_splits
  const uint split = gl_WorkGroupID.y;
  if (split >= n_active) return;  // uniform: the whole workgroup leaves
  const uint k_begin = lo + split * per_split;
  const uint k_end = min(k_begin + per_split, p + 1);

  for (uint i = lid; i < kHeads * d; i += gl_WorkGroupSize.x) {
    const uint h = i / d, e = i % d;
    q_sh[h * kMaxD + e] = h < n_heads ? q[(h0 + h) * d + e] : 0.0;
  }
  if (lid < kHeads) {
    m_sh[lid] = kMasked;
    l_sh[lid] = 0.0;
  }
  float acc[kHeads];
  for (uint h = 0; h < kHeads; ++h) acc[h] = 0.0;
  barrier();

  const uint kv_stride = pc.n_kv * d, kv_off = kvh * d;
  for (uint base = k_begin; base < k_end; base += kTile) {
    const uint n_tile = min(kTile, k_end - base);
    // This invocation's dim of the tile's V rows: loads in flight during the scores.
    float vv[kTile];
    for (uint i = 0; i < kTile; ++i) {
      vv[i] = has_dim && i < n_tile
                  ? v_cache[kv_slot(base + i, pc.slots) * kv_stride + kv_off + j]
                  : 0.0;
    }
    // Scores: kKeys keys per subgroup at once, lanes over d (coalesced K reads).
    for (uint i0 = gl_SubgroupID * kKeys; i0 < n_tile; i0 += gl_NumSubgroups * kKeys) {
      float dot[kKeys * kHeads];
      for (uint i = 0; i < kKeys * kHeads; ++i) dot[i] = 0.0;
      for (uint c = 0; c < kChunks; ++c) {
        const uint e = gl_SubgroupInvocationID + c * gl_SubgroupSize;
        if (e >= d) break;
        float kv[kKeys];
        for (uint u = 0; u < kKeys; ++u) {
          const uint s = base + min(i0 + u, n_tile - 1);  // past the tile: a valid key, unused
          kv[u] = kv_key(kv_slot(s, pc.slots) * kv_stride + kv_off, e, d, s);
        }
        for (uint h = 0; h < kHeads; ++h) {
          const float qv = q_sh[h * kMaxD + e];
          for (uint u = 0; u < kKeys; ++u) dot[u * kHeads + h] += qv * kv[u];
        }
      }
      for (uint u = 0; u < kKeys; ++u) {
        for (uint h = 0; h < kHeads; ++h) {
          const float total = subgroupAdd(dot[u * kHeads + h]);
          if (subgroupElect() && i0 + u < kTile) {
            p_sh[h * kTile + i0 + u] = i0 + u < n_tile ? total : kMasked;
          }
        }
      }
    }
    barrier();
    // Online softmax: subgroup per head (keys past n_tile hold kMasked or are never read).
    for (uint h = gl_SubgroupID; h < kHeads; h += gl_NumSubgroups) {
      float mx = kMasked;
      for (uint i = gl_SubgroupInvocationID; i < n_tile; i += gl_SubgroupSize) {
        mx = max(mx, p_sh[h * kTile + i]);
      }
      const float m_old = m_sh[h];
      const float m_new = max(m_old, subgroupMax(mx));
      float sum = 0.0;
      for (uint i = gl_SubgroupInvocationID; i < kTile; i += gl_SubgroupSize) {
        const float pr = i < n_tile ? exp(p_sh[h * kTile + i] - m_new) : 0.0;
        p_sh[h * kTile + i] = pr;
        sum += pr;
      }
      sum = subgroupAdd(sum);
      if (subgroupElect()) {
        const float alpha = exp(m_old - m_new);  // 0 on the first tile (m_old masked)
        alpha_sh[h] = alpha;
        l_sh[h] = l_sh[h] * alpha + sum;
        m_sh[h] = m_new;
      }
    }
    barrier();
    for (uint h = 0; h < kHeads; ++h) {
      float a = acc[h] * alpha_sh[h];
      for (uint i = 0; i < kTile; ++i) a += p_sh[h * kTile + i] * vv[i];
      acc[h] = a;
    }
    barrier();  // p_sh and alpha_sh are rewritten by the next tile
  }

  if (n_active == 1) {  // one split: normalise and write out
    for (uint h = 0; h < n_heads; ++h) {
      if (has_dim) out_rows[(h0 + h) * d + j] = acc[h] / l_sh[h];
    }
    return;
  }
  // Partials: o [split, n_q, d], then (m, l) [slice, split, n_q] pairs (each slice its own
  // copy, so a slice's merge reads only what its own splits wrote).
  const uint ml0 = pc.n_splits * pc.n_q * d;
  const uint ml_slice = ml0 + gl_WorkGroupID.x * pc.n_splits * pc.n_q * 2;
  for (uint h = 0; h < n_heads; ++h) {
    if (has_dim) scratch[(split * pc.n_q + h0 + h) * d + j] = acc[h];
  }
  if (lid < n_heads) {
    scratch[ml_slice + (split * pc.n_q + h0 + lid) * 2] = m_sh[lid];
    scratch[ml_slice + (split * pc.n_q + h0 + lid) * 2 + 1] = l_sh[lid];
  }
  // Count this split in; the last of the n_active merges. The release barrier orders every
  // invocation's partial writes before invocation 0's device-scope atomic; the acquire one
  // after it makes the other splits' partials visible to the whole merging workgroup.
  controlBarrier(gl_ScopeWorkgroup, gl_ScopeDevice, gl_StorageSemanticsBuffer,
                 gl_SemanticsAcquireRelease);
  if (lid == 0) {
    const uint counter = gl_WorkGroupID.x * gl_NumWorkGroups.z + gl_WorkGroupID.z;
    const uint before = atomicAdd(counters[counter], 1u, gl_ScopeDevice,
                                  gl_StorageSemanticsBuffer, gl_SemanticsAcquireRelease);
    last_sh = before == n_active - 1;
    // Every split has counted: reset for the next replay (ordered after this dispatch by the
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

  // out = sum_s e^(m_s - M) o_s / sum_s e^(m_s - M) l_s, M = max_s m_s (§4.7: one softmax).
  for (uint h = gl_SubgroupID; h < n_heads; h += gl_NumSubgroups) {
    const uint row = h0 + h;
    float m = kMasked;
    for (uint s = gl_SubgroupInvocationID; s < n_active; s += gl_SubgroupSize) {
      m = max(m, scratch[ml_slice + (s * pc.n_q + row) * 2]);
    }
    m = subgroupMax(m);
    float l = 0.0;
    for (uint s = gl_SubgroupInvocationID; s < n_active; s += gl_SubgroupSize) {
      const uint i = ml_slice + (s * pc.n_q + row) * 2;
      l += exp(scratch[i] - m) * scratch[i + 1];
    }
    l = subgroupAdd(l);
    for (uint s = gl_SubgroupInvocationID; s < n_active; s += gl_SubgroupSize) {
      w_sh[h * INFER_ATTN_MAX_SPLITS + s] =
          exp(scratch[ml_slice + (s * pc.n_q + row) * 2] - m) / l;
    }
  }
  barrier();
  if (!has_dim) return;
  for (uint h = 0; h < n_heads; ++h) {
    float o = 0.0;
    for (uint s = 0; s < n_active; ++s) {
      o += w_sh[h * INFER_ATTN_MAX_SPLITS + s] * scratch[(s * pc.n_q + h0 + h) * d + j];
    }
    out_rows[(h0 + h) * d + j] = o;
  }
}
