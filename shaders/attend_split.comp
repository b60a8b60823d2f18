// Decode attention (T = 1) in one dispatch: flash-decoding, split over keys, merged by the last
// workgroup (attention.h, "Split decode"). Bindings as attend.comp: 0 step, 1 q [n_q, d]
// (normed, rotated), 2 k_cache, 3 v_cache [slots, n_kv, d] (key s at row kv_slot(s)), 4 out
// [n_q, d], 5 scratch (partials), 6 counters, 7 inv_freq [d/2] (ring modes rotate keys on load).
// Spec: LOCAL_SIZE, ROWS = heads_per_group, MAX_D = d (one pipeline per head dim: the d loops
// have constant trip counts and unroll), DIMS = ceil(d / LOCAL_SIZE), TILE keys a tile,
// KEYS_PER_SUBGROUP (a subgroup's keys a round), D_CHUNKS = ceil(d / smallest subgroup size),
// MAX_SUBGROUPS >= gl_NumSubgroups, KV_MODE.
// Workgroup (0, y = split, z = the heads of one KV head's group): the keys [lo, p] the token
// sees are cut at run time into splits of >= min_keys keys (whole tiles); workgroups past the
// last split leave at once. Per tile every load is issued before it is needed: each invocation
// holds its DIMS dims of the tile's V rows (in flight while the scores are computed), each
// subgroup loads its KEYS_PER_SUBGROUP K rows at once (lanes over d, coalesced) and reduces
// with subgroupAdd; a subgroup per head then updates the running max and sum, and every
// invocation adds the probabilities times the V values it holds. So a tile waits on memory
// once, where the two passes (attend_scores, attend_pv) wait in each and on the barrier
// between them.
// The last split to finish (an atomic counter per head group, acquire/release at device scope,
// GL_KHR_memory_scope_semantics) merges and resets the counter for the next replay. Scores
// unscaled, softmax in f32.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_control_flow_attributes : require

#define INFER_ATTN_ATTEND
#include "attention.h"
#include "step.h"

layout(local_size_x_id = INFER_ATTN_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_ATTN_SPEC_MAX_SUBGROUPS) const uint kMaxSubgroups = 32;
layout(constant_id = INFER_ATTN_SPEC_ROWS) const uint kHeads = 8;
layout(constant_id = INFER_ATTN_SPEC_TILE) const uint kTile = 32;
layout(constant_id = INFER_ATTN_SPEC_MAX_D) const uint kD = 256;
layout(constant_id = INFER_ATTN_SPEC_DIMS) const uint kDims = 1;
layout(constant_id = INFER_ATTN_SPEC_KEYS_PER_SUBGROUP) const uint kKeys = 4;
layout(constant_id = INFER_ATTN_SPEC_D_CHUNKS) const uint kChunks = 8;

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

shared float q_sh[kHeads * kD];
shared float p_sh[kHeads * kTile];  // scores, then probabilities, of the current tile
shared float m_sh[kHeads];          // running max
shared float l_sh[kHeads];          // running sum of exp(score - max)
shared float alpha_sh[kHeads];      // rescale of the output for the current tile
shared float w_sh[kHeads * INFER_ATTN_MAX_SPLITS];  // merge: weight of each split's partial
shared bool last_sh;                                // this workgroup merges

// This lane's elements (e = lane + c · subgroup size) of the round's K rows:
// kv[j · kChunks + c]; this invocation's dims (lid + t · LOCAL_SIZE) of the tile's V rows:
// vv[i · kDims + t]. (Globals: glslc cannot pass arrays sized by spec constants.)
float kv[kKeys * kChunks];
float vv[kTile * kDims];

// K rows first .. first + kKeys - 1 (key indices from lo); keys past `end` load key end - 1 (a
// valid row, never used), elements past d are 0. No branch on the data: all in flight at once.
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

// V rows base .. base + kTile - 1, past `end` as load_keys; dims past d load d - 1 (unused).
void load_values(uint base, uint end, uint lo, uint kv_off) {
  [[unroll]] for (uint i = 0; i < kTile; ++i) {
    const uint row = kv_slot(lo + min(base + i, end - 1), pc.slots) * pc.n_kv * kD + kv_off;
    [[unroll]] for (uint t = 0; t < kDims; ++t) {
      vv[i * kDims + t] = v_cache[row + min(gl_LocalInvocationID.x + t * gl_WorkGroupSize.x,
                                            kD - 1)];
    }
  }
}

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint group = pc.n_q / pc.n_kv;  // query heads per KV head (GQA, contiguous)
  const uint head_groups = (group + pc.heads_per_group - 1) / pc.heads_per_group;
  const uint kvh = gl_WorkGroupID.z / head_groups;
  const uint h0 = kvh * group + (gl_WorkGroupID.z % head_groups) * pc.heads_per_group;
  const uint n_heads = min(pc.heads_per_group, (kvh + 1) * group - h0);

  const uint p = kv_cache_pos0();  // the token's cache position
  const uint lo = (pc.window > 0 && p + 1 > pc.window) ? p + 1 - pc.window : 0;
  const uint n_keys = p + 1 - lo;
  const uint per_split =
      (max((n_keys + pc.n_splits - 1) / pc.n_splits, pc.min_keys) + kTile - 1) / kTile * kTile;
  const uint n_active = (n_keys + per_split - 1) / per_split;  // splits with keys, <= n_splits
  const uint split = gl_WorkGroupID.y;
  if (split >= n_active) return;  // uniform: the whole workgroup leaves
  const uint k_begin = split * per_split;  // key indices from lo
  const uint k_end = min(k_begin + per_split, n_keys);
  const uint kv_off = kvh * kD;
  const uint round = gl_NumSubgroups * kKeys;

  // The first tile's loads in flight while q is staged.
  load_values(k_begin, k_end, lo, kv_off);
  load_keys(k_begin + gl_SubgroupID * kKeys, min(k_begin + kTile, k_end), lo, kv_off);
  const uint q_per = (kHeads * kD + gl_WorkGroupSize.x - 1) / gl_WorkGroupSize.x;  // constant
  [[unroll]] for (uint u = 0; u < q_per; ++u) {
    const uint i = lid + u * gl_WorkGroupSize.x;
    if (i < kHeads * kD) q_sh[i] = i / kD < n_heads ? q[h0 * kD + i] : 0.0;
  }
  if (lid < kHeads) {
    m_sh[lid] = kMasked;
    l_sh[lid] = 0.0;
  }
  float acc[kHeads * kDims];
  [[unroll]] for (uint i = 0; i < kHeads * kDims; ++i) acc[i] = 0.0;
  barrier();

  for (uint base = k_begin; base < k_end; base += kTile) {  // uniform in the workgroup
    const uint tile_end = min(base + kTile, k_end);
    // Scores: rounds of kKeys keys a subgroup (kv holds the round's rows on entry).
    for (uint i0 = gl_SubgroupID * kKeys; i0 < kTile; i0 += round) {  // uniform in the subgroup
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
      // The next round's rows (this tile's, else the next tile's first) before the stores.
      if (i0 + round < kTile) {
        load_keys(base + i0 + round, tile_end, lo, kv_off);
      } else if (base + kTile < k_end) {
        load_keys(base + kTile + gl_SubgroupID * kKeys, min(base + 2 * kTile, k_end), lo, kv_off);
      }
      [[unroll]] for (uint j = 0; j < kKeys; ++j) {
        [[unroll]] for (uint h = 0; h < kHeads; ++h) {
          const float total = subgroupAdd(dot[j * kHeads + h]);
          if (subgroupElect() && i0 + j < kTile) {
            p_sh[h * kTile + i0 + j] = base + i0 + j < tile_end ? total : kMasked;
          }
        }
      }
    }
    barrier();
    // Online softmax: a subgroup per head (masked keys give exp(kMasked - max) = 0).
    for (uint h = gl_SubgroupID; h < kHeads; h += gl_NumSubgroups) {
      float mx = kMasked;
      for (uint i = gl_SubgroupInvocationID; i < kTile; i += gl_SubgroupSize) {
        mx = max(mx, p_sh[h * kTile + i]);
      }
      const float m_old = m_sh[h];
      const float m_new = max(m_old, subgroupMax(mx));
      float sum = 0.0;
      for (uint i = gl_SubgroupInvocationID; i < kTile; i += gl_SubgroupSize) {
        const float pr = exp(p_sh[h * kTile + i] - m_new);
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
    [[unroll]] for (uint h = 0; h < kHeads; ++h) {
      const float alpha = alpha_sh[h];
      [[unroll]] for (uint t = 0; t < kDims; ++t) {
        float a = acc[h * kDims + t] * alpha;
        [[unroll]] for (uint i = 0; i < kTile; ++i) a += p_sh[h * kTile + i] * vv[i * kDims + t];
        acc[h * kDims + t] = a;
      }
    }
    if (base + kTile < k_end) load_values(base + kTile, k_end, lo, kv_off);
    barrier();  // p_sh and alpha_sh are rewritten by the next tile
  }

  if (n_active == 1) {  // one split: normalise and write out
    [[unroll]] for (uint t = 0; t < kDims; ++t) {
      const uint j = lid + t * gl_WorkGroupSize.x;
      if (j >= kD) continue;
      for (uint h = 0; h < n_heads; ++h) {
        out_rows[(h0 + h) * kD + j] = acc[h * kDims + t] / l_sh[h];
      }
    }
    return;
  }
  // Partials: o [split, n_q, d], then (m, l) [split, n_q] pairs.
  const uint ml0 = pc.n_splits * pc.n_q * kD;
  [[unroll]] for (uint t = 0; t < kDims; ++t) {
    const uint j = lid + t * gl_WorkGroupSize.x;
    if (j >= kD) continue;
    for (uint h = 0; h < n_heads; ++h) {
      scratch[(split * pc.n_q + h0 + h) * kD + j] = acc[h * kDims + t];
    }
  }
  if (lid < n_heads) {
    scratch[ml0 + (split * pc.n_q + h0 + lid) * 2] = m_sh[lid];
    scratch[ml0 + (split * pc.n_q + h0 + lid) * 2 + 1] = l_sh[lid];
  }
  // Count this split in; the last of the n_active merges. The release barrier orders every
  // invocation's partial writes before invocation 0's device-scope atomic; the acquire one
  // after it makes the other splits' partials visible to the whole merging workgroup.
  controlBarrier(gl_ScopeWorkgroup, gl_ScopeDevice, gl_StorageSemanticsBuffer,
                 gl_SemanticsAcquireRelease);
  if (lid == 0) {
    const uint counter = gl_WorkGroupID.z;
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
      m = max(m, scratch[ml0 + (s * pc.n_q + row) * 2]);
    }
    m = subgroupMax(m);
    float l = 0.0;
    for (uint s = gl_SubgroupInvocationID; s < n_active; s += gl_SubgroupSize) {
      const uint i = ml0 + (s * pc.n_q + row) * 2;
      l += exp(scratch[i] - m) * scratch[i + 1];
    }
    l = subgroupAdd(l);
    for (uint s = gl_SubgroupInvocationID; s < n_active; s += gl_SubgroupSize) {
      w_sh[h * INFER_ATTN_MAX_SPLITS + s] = exp(scratch[ml0 + (s * pc.n_q + row) * 2] - m) / l;
    }
  }
  barrier();
  // Every (head, dim) output of the group spread over the workgroup, four partials loaded
  // before they are added (in split order either way).
  const uint split_stride = pc.n_q * kD;
  for (uint i = lid; i < n_heads * kD; i += gl_WorkGroupSize.x) {
    const uint h = i / kD, at = (h0 + h) * kD + i % kD;
    const uint w0 = h * INFER_ATTN_MAX_SPLITS;
    float o = 0.0;
    uint s = 0;
    for (; s + 4 <= n_active; s += 4) {
      const float a = scratch[s * split_stride + at], b = scratch[(s + 1) * split_stride + at];
      const float c = scratch[(s + 2) * split_stride + at];
      const float e = scratch[(s + 3) * split_stride + at];
      o += w_sh[w0 + s] * a;
      o += w_sh[w0 + s + 1] * b;
      o += w_sh[w0 + s + 2] * c;
      o += w_sh[w0 + s + 3] * e;
    }
    for (; s < n_active; ++s) o += w_sh[w0 + s] * scratch[s * split_stride + at];
    out_rows[at] = o;
  }
}
