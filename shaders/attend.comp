// Causal / sliding-window attention over the KV ring, flash style (GEMMA4_TEXT.md §4.5, §4.7):
//   step:    binding 0, uint words (step.h): position of token 0 at INFER_STEP_POS0
//   q:       binding 1, [T, n_q, d] f32 (normed and rotated)
//   k_cache: binding 2, v_cache: binding 3, [slots, n_kv, d] f32, position s at row s % slots
//   out:     binding 4, [T, n_q, d] f32
//   scratch: binding 5, split partials (layout in attention.h)
//   counters: binding 6, uint per (token group, head group): splits done, 0 between dispatches
//   inv_freq: binding 7, [d/2] f32: ring modes rotate keys at their cache position on load
//   (positions are cache positions and key s sits at kv_slot(s), common/kv_ring.glsl)
//   push: AttendPush (attention.h). spec: LOCAL_SIZE, ROWS query rows, TILE keys per tile,
//   MAX_D >= d, DIMS = ceil(MAX_D / LOCAL_SIZE), KV_MODE (common/kv_ring.glsl).
// A workgroup's ROWS rows (query heads of one KV head, for one or a few tokens) share every
// K/V row it loads. Keys [lo, p_last] the rows may see are cut into up to n_splits ranges of
// at least min_keys keys (split-K, "flash-decoding"), one per workgroup x, so a single decode
// token still fills a large GPU; the key count is computed here from the step buffer, so the
// grid is fixed at record time and only the splits the keys need do work. The last split to
// finish merges the partials (no second dispatch): partials go out through `coherent` writes
// and memoryBarrierBuffer before the split counts itself with an atomic, and the merging
// workgroup reads them after seeing the count complete.
// Per tile: one subgroup per key computes all rows' scores (lanes over d, subgroupAdd), one
// subgroup per row updates the running max and sum, then each invocation adds p · V into the
// output dims it owns. Scores are unscaled, softmax in f32.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#define INFER_ATTN_ATTEND
#include "attention.h"
#include "step.h"

layout(local_size_x_id = INFER_ATTN_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_ATTN_SPEC_ROWS) const uint kRows = 8;
layout(constant_id = INFER_ATTN_SPEC_TILE) const uint kTile = 32;
layout(constant_id = INFER_ATTN_SPEC_MAX_D) const uint kMaxD = 256;
layout(constant_id = INFER_ATTN_SPEC_DIMS) const uint kDims = 2;

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

// A masked score, and the running max before any key: finite, so no inf - inf. Real scores
// are dot products of normed rows, nowhere near it.
const float kMasked = -3.0e38;

shared float q_sh[kRows * kMaxD];
shared float p_sh[kRows * kTile];  // scores, then probabilities, of the current tile
shared float m_sh[kRows];          // running max
shared float l_sh[kRows];          // running sum of exp(score - max)
shared float alpha_sh[kRows];      // rescale of the output for the current tile
shared float w_sh[INFER_ATTN_MAX_SPLITS];  // merge: weight of each split's partial
shared bool last_sh;                       // this workgroup merges

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint d = pc.d;
  const uint group = pc.n_q / pc.n_kv;  // query heads per KV head (GQA, contiguous)
  const uint head_groups = (group + pc.heads_per_group - 1) / pc.heads_per_group;
  const uint kvh = gl_WorkGroupID.z / head_groups;
  const uint h0 = kvh * group + (gl_WorkGroupID.z % head_groups) * pc.heads_per_group;
  const uint h_end = (kvh + 1) * group;
  const uint t0 = gl_WorkGroupID.y * pc.tokens_per_group;
  const uint t_end = min(t0 + pc.tokens_per_group, pc.T);
  const uint pos0 = kv_cache_pos0();  // cache position of token 0

  // Keys of this split: [k_begin, k_end) within [lo, p_last], whole tiles per split.
  const uint p_last = pos0 + t_end - 1;
  const uint p_first = pos0 + t0;
  const uint lo = (pc.window > 0 && p_first + 1 > pc.window) ? p_first + 1 - pc.window : 0;
  const uint n_keys = p_last + 1 - lo;
  const uint per_split =
      (max((n_keys + pc.n_splits - 1) / pc.n_splits, pc.min_keys) + kTile - 1) / kTile * kTile;
  const uint n_active = (n_keys + per_split - 1) / per_split;  // splits with keys, <= n_splits
  if (gl_WorkGroupID.x >= n_active) return;  // uniform: the whole workgroup leaves
  const bool direct = n_active == 1;
  const uint k_begin = lo + gl_WorkGroupID.x * per_split;
  const uint k_end = min(k_begin + per_split, p_last + 1);

  for (uint i = lid; i < kRows * d; i += gl_WorkGroupSize.x) {
    const uint r = i / d, e = i % d;
    const uint t = t0 + r / pc.heads_per_group, h = h0 + r % pc.heads_per_group;
    const bool live = r < pc.heads_per_group * pc.tokens_per_group && t < t_end && h < h_end;
    q_sh[r * kMaxD + e] = live ? q[(t * pc.n_q + h) * d + e] : 0.0;
  }
  if (lid < kRows) {
    m_sh[lid] = kMasked;
    l_sh[lid] = 0.0;
  }
  float acc[kRows * kDims];
  for (uint i = 0; i < kRows * kDims; ++i) acc[i] = 0.0;
  barrier();

  const uint kv_stride = pc.n_kv * d, kv_off = kvh * d;
  for (uint base = k_begin; base < k_end; base += kTile) {
    const uint n_tile = min(kTile, k_end - base);
    // Scores: subgroup per key, lanes over d (coalesced K reads).
    for (uint i = gl_SubgroupID; i < kTile; i += gl_NumSubgroups) {
      float dot[kRows];
      for (uint r = 0; r < kRows; ++r) dot[r] = 0.0;
      const uint s = base + i;
      if (i < n_tile) {
        const uint kb = kv_slot(s, pc.slots) * kv_stride + kv_off;
        for (uint e = gl_SubgroupInvocationID; e < d; e += gl_SubgroupSize) {
          const float kv = kv_key(kb, e, d, s);
          for (uint r = 0; r < kRows; ++r) dot[r] += q_sh[r * kMaxD + e] * kv;
        }
      }
      for (uint r = 0; r < kRows; ++r) {
        const float total = subgroupAdd(dot[r]);
        const uint p = pos0 + t0 + r / pc.heads_per_group;  // this row's position
        const bool allowed = i < n_tile && s <= p && (pc.window == 0 || s + pc.window > p);
        if (subgroupElect()) p_sh[r * kTile + i] = allowed ? total : kMasked;
      }
    }
    barrier();
    // Online softmax: subgroup per row.
    for (uint r = gl_SubgroupID; r < kRows; r += gl_NumSubgroups) {
      float mx = kMasked;
      for (uint i = gl_SubgroupInvocationID; i < n_tile; i += gl_SubgroupSize) {
        mx = max(mx, p_sh[r * kTile + i]);
      }
      const float m_old = m_sh[r];
      const float m_new = max(m_old, subgroupMax(mx));
      float sum = 0.0;
      for (uint i = gl_SubgroupInvocationID; i < kTile; i += gl_SubgroupSize) {
        const float sc = p_sh[r * kTile + i];
        const float pr = sc > kMasked ? exp(sc - m_new) : 0.0;
        p_sh[r * kTile + i] = pr;
        sum += pr;
      }
      sum = subgroupAdd(sum);
      if (subgroupElect()) {
        const float alpha = exp(m_old - m_new);  // 0 when m_old is kMasked and m_new is not
        alpha_sh[r] = alpha;
        l_sh[r] = l_sh[r] * alpha + sum;
        m_sh[r] = m_new;
      }
    }
    barrier();
    // out += p · V: invocation per output dim (coalesced V reads), all rows at once.
    for (uint c = 0; c < kDims; ++c) {
      for (uint r = 0; r < kRows; ++r) acc[r * kDims + c] *= alpha_sh[r];
    }
    for (uint i = 0; i < n_tile; ++i) {
      const uint vb = kv_slot(base + i, pc.slots) * kv_stride + kv_off;
      for (uint c = 0; c < kDims; ++c) {
        const uint j = lid + c * gl_WorkGroupSize.x;
        if (j < d) {
          const float vv = v_cache[vb + j];
          for (uint r = 0; r < kRows; ++r) acc[r * kDims + c] += p_sh[r * kTile + i] * vv;
        }
      }
    }
    barrier();  // p_sh and alpha_sh are rewritten by the next tile
  }

  const uint n_rows = pc.T * pc.n_q;
  const uint split_row0 = gl_WorkGroupID.x * n_rows;
  const uint ml0 = pc.n_splits * n_rows * d;  // (m, l) pairs after the o rows
  for (uint r = 0; r < kRows; ++r) {
    const uint t = t0 + r / pc.heads_per_group, h = h0 + r % pc.heads_per_group;
    if (r >= pc.heads_per_group * pc.tokens_per_group || t >= t_end || h >= h_end) continue;
    const uint row = t * pc.n_q + h;
    for (uint c = 0; c < kDims; ++c) {
      const uint j = lid + c * gl_WorkGroupSize.x;
      if (j >= d) continue;
      if (direct) {
        out_rows[row * d + j] = acc[r * kDims + c] / l_sh[r];
      } else {
        scratch[(split_row0 + row) * d + j] = acc[r * kDims + c];
      }
    }
    if (!direct && lid == 0) {
      scratch[ml0 + (split_row0 + row) * 2] = m_sh[r];
      scratch[ml0 + (split_row0 + row) * 2 + 1] = l_sh[r];
    }
  }
  if (direct) return;

  // Count this split in; the last of the `n_active` splits merges (threadfence-reduction).
  memoryBarrierBuffer();
  barrier();
  if (lid == 0) {
    const uint counter = gl_WorkGroupID.y * gl_NumWorkGroups.z + gl_WorkGroupID.z;
    last_sh = atomicAdd(counters[counter], 1u) == n_active - 1;
    if (last_sh) atomicExchange(counters[counter], 0u);  // every split has counted: reset
  }
  barrier();
  if (!last_sh) return;
  memoryBarrierBuffer();

  // out = sum_s e^(m_s - M) o_s / sum_s e^(m_s - M) l_s, M = max_s m_s (§4.7: one softmax).
  for (uint r = 0; r < kRows; ++r) {
    const uint t = t0 + r / pc.heads_per_group, h = h0 + r % pc.heads_per_group;
    if (r >= pc.heads_per_group * pc.tokens_per_group || t >= t_end || h >= h_end) continue;
    const uint row = t * pc.n_q + h;
    float m = kMasked;
    for (uint s = 0; s < n_active; ++s) m = max(m, scratch[ml0 + (s * n_rows + row) * 2]);
    float l = 0.0;
    for (uint s = 0; s < n_active; ++s) {
      const uint i = ml0 + (s * n_rows + row) * 2;
      l += exp(scratch[i] - m) * scratch[i + 1];
    }
    barrier();  // w_sh of the previous row is read
    for (uint s = lid; s < n_active; s += gl_WorkGroupSize.x) {
      w_sh[s] = exp(scratch[ml0 + (s * n_rows + row) * 2] - m) / l;
    }
    barrier();
    for (uint j = lid; j < d; j += gl_WorkGroupSize.x) {
      float o = 0.0;
      for (uint s = 0; s < n_active; ++s) o += w_sh[s] * scratch[(s * n_rows + row) * d + j];
      out_rows[row * d + j] = o;
    }
  }
}
