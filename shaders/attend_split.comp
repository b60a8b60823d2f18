// Decode attention (T = 1) in one dispatch: flash-decoding, split over keys, merged by the last
// workgroup (attention.h, "Split decode"). Bindings as attend.comp: 0 step, 1 q [n_q, d]
// (normed, rotated), 2 k_cache, 3 v_cache [slots, n_kv, d] (key s at row kv_slot(s)), 4 out
// [n_q, d], 5 scratch (partials), 6 counters, 7 inv_freq [d/2] (ring modes rotate keys on load).
// Spec: LOCAL_SIZE, ROWS = heads a workgroup (of one KV head), MAX_D = d, TILE keys a tile
// (dividing LOCAL_SIZE: LANES = LOCAL_SIZE / TILE invocations share a key), SLICE =
// ceil(d / LANES), DIMS = ceil(d / LOCAL_SIZE), KV_MODE.
// Workgroup (0, y = split, z = head group): the keys [lo, p] the token sees are cut at run time
// into splits of >= min_keys keys (whole tiles); workgroups past the last split leave at once.
// A tile is one round of loads, all issued before any is used: invocation i holds SLICE of key
// i / LANES's K elements (key_elem: the LANES invocations of a key read it together, coalesced)
// and its DIMS output dims of every V row of the tile. No subgroup
// operation: partial dot products meet in shared memory (one invocation a (head, key) adds its
// LANES parts), the tile's max is read there, so any subgroup size works and no reduction
// serialises a subgroup. The next tile's K loads go out as soon as this tile's dots are taken.
// The last split to finish (an atomic counter per head group, acquire/release at device scope,
// GL_KHR_memory_scope_semantics) merges and resets the counter for the next replay. Scores
// unscaled, softmax in f32.
// INFER_ATTN_PREP (attend_split_prep.glsl): qkv_prep's work folded in, a dispatch less a layer:
// binding 1 is the raw q|k|v row instead of q, and the token's own key is attended from shared
// memory by the split that holds it.
// INFER_ATTN_INT8 (with PREP): the merge also writes out quantized as the o projection's
// integer-dot kernel takes it (binding 11, shaders/coop_x_prep.comp's INT8 layout for one token
// of n_q · d columns; d % 32 == 0), so that product needs no dispatch of its own to quantize it.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_control_flow_attributes : require

#define INFER_ATTN_ATTEND
#include "attention.h"
#include "step.h"

layout(local_size_x_id = INFER_ATTN_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_ATTN_SPEC_ROWS) const uint kHeads = 1;
layout(constant_id = INFER_ATTN_SPEC_TILE) const uint kTile = 32;
layout(constant_id = INFER_ATTN_SPEC_MAX_D) const uint kD = 256;
layout(constant_id = INFER_ATTN_SPEC_DIMS) const uint kDims = 1;
layout(constant_id = INFER_ATTN_SPEC_SLICE) const uint kSlice = 32;

layout(binding = 0, std430) readonly buffer Step { uint step[]; };
#ifndef INFER_ATTN_PREP
layout(binding = 1, std430) readonly buffer Q { float q[]; };
#endif
layout(binding = 2, std430) readonly buffer KCache { float k_cache[]; };
layout(binding = 2, std430) readonly buffer KCache4 { vec4 k_cache4[]; };
layout(binding = 3, std430) readonly buffer VCache { float v_cache[]; };
layout(binding = 4, std430) writeonly buffer Out { float out_rows[]; };
layout(binding = 5, std430) coherent buffer Scratch { float scratch[]; };
layout(binding = 6, std430) coherent buffer Counters { uint counters[]; };
layout(binding = 7, std430) readonly buffer InvFreq { float inv_freq[]; };  // ring modes: [d/2]
#ifdef INFER_ATTN_INT8
layout(binding = 11, std430) writeonly buffer OutQ { uint out_int8_words[]; };
layout(binding = 11, std430) writeonly buffer OutD { float out_int8_scales[]; };
#include "common/quant_x.glsl"
#endif

#define INFER_KV_ROTATE_KEYS
#include "common/rope.glsl"
#include "common/kv_ring.glsl"

// A masked score and the running max before any key: finite, so no inf - inf.
const float kMasked = -3.0e38;
const uint kLanes = gl_WorkGroupSize.x / kTile;  // invocations a key
// Exact-mode keys of a head dim that the lanes' quads tile read as vec4s: element j of a lane
// is (j / 4) · 4 · LANES + 4 · lane + j % 4, each load 16 bytes and a key's lanes one
// contiguous piece. Otherwise (ring modes rotate on load; other dims) lane + j · LANES, one
// float a load.
// (A function, not a global constant: glslc's optimizer misplaces such a spec-constant bool.)
bool quads() { return kKvMode == INFER_KV_EXACT && kD % (4u * kLanes) == 0u; }
uint key_elem(uint lane, uint j) {
  return quads() ? (j / 4u) * 4u * kLanes + lane * 4u + j % 4u : lane + j * kLanes;
}

shared float q_sh[kHeads * kD];
shared float part_sh[kHeads * gl_WorkGroupSize.x];  // [head][key][lane]: partial dots
shared float s_sh[kHeads * kTile];  // the tile's scores
shared float p_sh[kHeads * kTile];  // and probabilities
shared float m_sh[kHeads];          // running max
shared float m_new_sh[kHeads];      // with this tile
shared float l_sh[kHeads];          // running sum of exp(score - max)
shared float w_sh[kHeads * INFER_ATTN_MAX_SPLITS];  // merge: each split's max, then weight
shared float l_split_sh[kHeads * INFER_ATTN_MAX_SPLITS];  // merge: each split's sum
shared bool last_sh;                                // this workgroup merges

// This invocation's K elements of its key (kk[j]: element key_elem(lane, j)) and V values of
// its dims (vv[k · kDims + t]: dim lid + t · LOCAL_SIZE of the tile's key k). (Globals: glslc
// cannot pass arrays sized by spec constants.)
float kk[kSlice];
float vv[kTile * kDims];
float acc[kHeads * kDims];  // the output dims of each head, unnormalised

#ifdef INFER_ATTN_PREP
#include "attend_split_prep.glsl"
#endif

#ifdef INFER_ATTN_INT8
// The head group's output, left in q_sh (q is done with by then), quantized block by block into
// binding 11. Uniform control flow.
void write_int8_out(uint h0, uint n_heads) {
  barrier();
  const uint cols = pc.n_q * kD;
  for (uint b = gl_LocalInvocationIndex; b < n_heads * kD / 32; b += gl_WorkGroupSize.x) {
    const uint c0 = h0 * kD + 32 * b;  // the block's first column of out
    QUANT_X_STORE_BLOCK(q_sh, 32 * b, out_int8_words, c0 / 4, out_int8_scales, cols / 4 + c0 / 32);
  }
}
#endif

// Key index `first + key` (from lo) of a tile ending at `end`: past it the last key (a valid
// row, never used); elements past d are 0. No branch on the data: all in flight at once.
void load_keys(uint first, uint end, uint lo, uint kv_off) {
  const uint key = gl_LocalInvocationID.x / kLanes, lane = gl_LocalInvocationID.x % kLanes;
  const uint s = lo + min(first + key, end - 1);
  const uint row = kv_slot(s, pc.slots) * pc.n_kv * kD + kv_off;
  if (quads()) {  // spec constants: the driver folds one branch away
    [[unroll]] for (uint j = 0; j < kSlice; j += 4) {
      const vec4 x = k_cache4[(row + key_elem(lane, j)) / 4u];
      kk[j] = x.x;
      kk[j + 1] = x.y;
      kk[j + 2] = x.z;
      kk[j + 3] = x.w;
    }
    return;
  }
  [[unroll]] for (uint j = 0; j < kSlice; ++j) {
    const uint e = key_elem(lane, j);
    const float x = kv_key(row, min(e, kD - 1), kD, s);
    kk[j] = e < kD ? x : 0.0;
  }
}

// V rows first .. first + kTile - 1, past `end` as load_keys; dims past d load d - 1 (unused).
void load_values(uint first, uint end, uint lo, uint kv_off) {
  [[unroll]] for (uint k = 0; k < kTile; ++k) {
    const uint row = kv_slot(lo + min(first + k, end - 1), pc.slots) * pc.n_kv * kD + kv_off;
    [[unroll]] for (uint t = 0; t < kDims; ++t) {
      vv[k * kDims + t] = v_cache[row + min(gl_LocalInvocationID.x + t * gl_WorkGroupSize.x,
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
  const uint key = lid / kLanes, lane = lid % kLanes;
#ifdef INFER_ATTN_PREP
  // The split of the token's own key (the last key) takes it from shared memory after its tiles.
  const bool own_key = pc.prep_kv != 0u && k_end == n_keys;
  const uint loop_end = own_key ? k_end - 1 : k_end;
#else
  const uint loop_end = k_end;
#endif

  // The first tile's loads in flight while q is staged (a split of the own key alone loads
  // key k_begin, never used).
  const uint load_end = max(loop_end, k_begin + 1);
  load_keys(k_begin, min(k_begin + kTile, load_end), lo, kv_off);
  load_values(k_begin, load_end, lo, kv_off);
#ifdef INFER_ATTN_PREP
  prep_load(h0, n_heads, kvh, own_key);
  if (lid < kHeads) {
    m_sh[lid] = kMasked;
    l_sh[lid] = 0.0;
  }
  prep_finish(h0, n_heads, kvh, own_key,
              own_key && gl_WorkGroupID.z % head_groups == 0u, split == 0u);
#else
  const uint q_per = (kHeads * kD + gl_WorkGroupSize.x - 1) / gl_WorkGroupSize.x;  // constant
  [[unroll]] for (uint u = 0; u < q_per; ++u) {
    const uint i = lid + u * gl_WorkGroupSize.x;
    if (i < kHeads * kD) q_sh[i] = i / kD < n_heads ? q[h0 * kD + i] : 0.0;
  }
  if (lid < kHeads) {
    m_sh[lid] = kMasked;
    l_sh[lid] = 0.0;
  }
#endif
  [[unroll]] for (uint i = 0; i < kHeads * kDims; ++i) acc[i] = 0.0;
  barrier();

  for (uint base = k_begin; base < loop_end; base += kTile) {  // uniform in the workgroup
    const uint tile_end = min(base + kTile, loop_end);
    // This invocation's part of its key's dot with each head.
    [[unroll]] for (uint h = 0; h < kHeads; ++h) {
      float dot = 0.0;
      [[unroll]] for (uint j = 0; j < kSlice; ++j) {
        dot += q_sh[h * kD + min(key_elem(lane, j), kD - 1)] * kk[j];
      }
      part_sh[(h * kTile + key) * kLanes + lane] = dot;
    }
    if (base + kTile < loop_end) {
      load_keys(base + kTile, min(base + 2 * kTile, loop_end), lo, kv_off);
    }
    barrier();
    // One invocation a (head, key): its score from the parts.
    for (uint i = lid; i < kHeads * kTile; i += gl_WorkGroupSize.x) {
      float s = 0.0;
      for (uint l = 0; l < kLanes; ++l) s += part_sh[i * kLanes + l];
      s_sh[i] = base + i % kTile < tile_end ? s : kMasked;
    }
    barrier();
    // The tile's max per head and each key's probability under the new running max.
    for (uint i = lid; i < kHeads * kTile; i += gl_WorkGroupSize.x) {
      const uint h = i / kTile;
      float mt = kMasked;
      for (uint k = 0; k < kTile; ++k) mt = max(mt, s_sh[h * kTile + k]);
      const float m_new = max(m_sh[h], mt);
      p_sh[i] = exp(s_sh[i] - m_new);  // masked keys: 0
      if (i % kTile == 0) m_new_sh[h] = m_new;
    }
    barrier();
    [[unroll]] for (uint h = 0; h < kHeads; ++h) {
      const float alpha = exp(m_sh[h] - m_new_sh[h]);  // 0 on the first tile (m_sh masked)
      [[unroll]] for (uint t = 0; t < kDims; ++t) {
        float a = acc[h * kDims + t] * alpha;
        [[unroll]] for (uint k = 0; k < kTile; ++k) a += p_sh[h * kTile + k] * vv[k * kDims + t];
        acc[h * kDims + t] = a;
      }
    }
    if (base + kTile < loop_end) load_values(base + kTile, loop_end, lo, kv_off);
    barrier();  // m_sh, p_sh, part_sh and s_sh are rewritten below and by the next tile
    for (uint h = lid; h < kHeads; h += gl_WorkGroupSize.x) {
      float sum = 0.0;
      for (uint k = 0; k < kTile; ++k) sum += p_sh[h * kTile + k];
      l_sh[h] = l_sh[h] * exp(m_sh[h] - m_new_sh[h]) + sum;
      m_sh[h] = m_new_sh[h];
    }
  }
#ifdef INFER_ATTN_PREP
  if (own_key) attend_own_key();  // uniform in the workgroup
#endif
  barrier();  // the last tile's l_sh and m_sh

  if (n_active == 1) {  // one split: normalise and write out
    [[unroll]] for (uint t = 0; t < kDims; ++t) {
      const uint j = lid + t * gl_WorkGroupSize.x;
      if (j >= kD) continue;
      [[unroll]] for (uint h = 0; h < kHeads; ++h) {
        if (h < n_heads) out_rows[(h0 + h) * kD + j] = acc[h * kDims + t] / l_sh[h];
#ifdef INFER_ATTN_INT8
        if (h < n_heads) q_sh[h * kD + j] = acc[h * kDims + t] / l_sh[h];
#endif
      }
    }
#ifdef INFER_ATTN_INT8
    write_int8_out(h0, n_heads);
#endif
    return;
  }
  // Partials: o [split, n_q, d], then (m, l) [split, n_q] pairs.
  const uint ml0 = pc.n_splits * pc.n_q * kD;
  [[unroll]] for (uint t = 0; t < kDims; ++t) {
    const uint j = lid + t * gl_WorkGroupSize.x;
    if (j >= kD) continue;
    [[unroll]] for (uint h = 0; h < kHeads; ++h) {
      if (h < n_heads) scratch[(split * pc.n_q + h0 + h) * kD + j] = acc[h * kDims + t];
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
  // Every (head, split) pair's (m, l) loaded at once, an invocation each; then an invocation a
  // head finds M and L and turns w_sh into the weights.
  for (uint i = lid; i < n_heads * n_active; i += gl_WorkGroupSize.x) {
    const uint h = i / n_active, s = i % n_active;
    const uint at = ml0 + (s * pc.n_q + h0 + h) * 2;
    w_sh[h * INFER_ATTN_MAX_SPLITS + s] = scratch[at];
    l_split_sh[h * INFER_ATTN_MAX_SPLITS + s] = scratch[at + 1];
  }
  barrier();
  if (lid < n_heads) {
    const uint w0 = lid * INFER_ATTN_MAX_SPLITS;
    float m = kMasked;
    for (uint s = 0; s < n_active; ++s) m = max(m, w_sh[w0 + s]);
    float l = 0.0;
    for (uint s = 0; s < n_active; ++s) {
      const float e = exp(w_sh[w0 + s] - m);
      l += e * l_split_sh[w0 + s];
      w_sh[w0 + s] = e;
    }
    for (uint s = 0; s < n_active; ++s) w_sh[w0 + s] /= l;
  }
  barrier();
  // Every (head, dim) output of the group spread over the workgroup, eight partials loaded
  // before they are added (in split order either way).
  const uint split_stride = pc.n_q * kD;
  for (uint i = lid; i < n_heads * kD; i += gl_WorkGroupSize.x) {
    const uint h = i / kD, at = (h0 + h) * kD + i % kD;
    const uint w0 = h * INFER_ATTN_MAX_SPLITS;
    float o = 0.0;
    uint s = 0;
    for (; s + 8 <= n_active; s += 8) {
      float part[8];
      [[unroll]] for (uint u = 0; u < 8; ++u) part[u] = scratch[(s + u) * split_stride + at];
      [[unroll]] for (uint u = 0; u < 8; ++u) o += w_sh[w0 + s + u] * part[u];
    }
    for (; s < n_active; ++s) o += w_sh[w0 + s] * scratch[s * split_stride + at];
    out_rows[at] = o;
#ifdef INFER_ATTN_INT8
    q_sh[i] = o;  // q is done with: the group's output, for its blocks below
#endif
  }
#ifdef INFER_ATTN_INT8
  write_int8_out(h0, n_heads);
#endif
}
