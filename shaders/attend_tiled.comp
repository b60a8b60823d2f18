// Prefill attention, register-blocked (flash-attention-2 style, f32 FMA; GEMMA4_TEXT.md §4.5,
// §4.7). Bindings, push constants, grid and split-K contract as attend.comp:
//   step: 0, q: 1 [T, n_q, d], k_cache: 2, v_cache: 3 [slots, n_kv, d], out: 4 [T, n_q, d],
//   scratch: 5, counters: 6, inv_freq: 7 [d/2] (ring modes). push: AttendPush (attention.h).
//   spec: ROWS query rows (a multiple of 4), TILE keys a tile (a multiple of 16), LOCAL_SIZE =
//   ROWS/4 x TILE/4, MAX_D = d (one pipeline per head dim, a multiple of 4), SLICE dims of a
//   staged Q/K slice (a multiple of 8), V_KEYS keys of a staged V sub-tile (a multiple of 4
//   dividing TILE), STAGE_VECS vec4s of the staging region (gpu/ops/attention_prefill.cpp sizes
//   it; at least ROWS x n_splits floats), KV_MODE (common/kv_ring.glsl).
// Invocation (rb, kb) = (lid / (TILE/4), lid % (TILE/4)) owns query rows rb + ROWS/4 · i and,
// in a tile, keys kb + TILE/4 · j (i, j < 4): a 4 x 4 block of scores summed over d with plain
// FMAs from shared memory, 8 vec4 loads per 64 FMAs. Its output block is the same 4 rows times
// the dims 4 (kb + TILE/4 · c) .. + 3 (c < DIM_VECS): per 4 keys 4 + 4 · DIM_VECS vec4 loads
// per 64 · DIM_VECS FMAs. Keys and dims are strided, not contiguous, so that the 8 lanes of a
// 128-bit shared-load phase read 8 different rows of the K slice (row stride SLICE + 4 floats,
// an odd number of vec4s: 8 rows start in 8 different 4-bank groups) and 8 consecutive vec4s of
// a V row; Q and P reads are broadcasts.
// Per tile: Q and K are staged a slice of dims at a time (dims in pairs (e, e + d/2), so a ring
// mode's RoPE of a key costs one sincos per pair; the dot products do not care about the
// order), then each row's max goes through shared memory (one partial per invocation), the
// probabilities into the shared P tile, and V is staged V_KEYS keys at a time for P · V. The
// running max is per row and the same in every invocation holding the row; the running sum is
// kept per invocation (its keys only) and added up once at the end. Scores are unscaled
// (scale 1.0, §4.7), softmax in f32. No subgroup operations: any subgroup size works.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

#define INFER_ATTN_ATTEND
#include "attention.h"
#include "step.h"

layout(local_size_x_id = INFER_ATTN_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_ATTN_SPEC_ROWS) const uint kRows = 64;
layout(constant_id = INFER_ATTN_SPEC_TILE) const uint kTile = 64;
layout(constant_id = INFER_ATTN_SPEC_MAX_D) const uint kD = 256;
layout(constant_id = INFER_ATTN_SPEC_SLICE) const uint kSlice = 32;
layout(constant_id = INFER_ATTN_SPEC_V_KEYS) const uint kVKeys = 32;
layout(constant_id = INFER_ATTN_SPEC_STAGE_VECS) const uint kStageVecs = 2048;

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

const float kMasked = -3.0e38;  // a masked score and the max before any key (attend.comp)

const uint kRowGroups = kRows / 4;
const uint kKeyGroups = kTile / 4;
const uint kLocal = kRowGroups * kKeyGroups;
const uint kHalf = kSlice / 2;                   // dim pairs of a slice
const uint kSlices = (kD / 2 + kHalf - 1) / kHalf;
const uint kSliceVecs = kSlice / 4 + 1;          // a staged Q/K row, padded by one vec4
const uint kQkPairs = (kRows + kTile) * kHalf;   // staging items of a slice
const uint kDimVecs = (kD / 4 + kKeyGroups - 1) / kKeyGroups;  // output vec4s a row
const uint kVRow = 4 * kKeyGroups * kDimVecs;   // floats of a staged V row (zeros past d)
const uint kVFloats = kVKeys * kVRow;
const uint kTileVecs = kTile / 4;

// The staging region: the Q rows then the K rows of a slice, a V sub-tile, or per-row partials
// ([ROWS, TILE/4] maxima or sums, the merge's [ROWS, n_splits] weights), one at a time.
shared vec4 stage_sh[kStageVecs];
shared vec4 p_sh[kRows * kTileVecs];  // probabilities [ROWS, TILE]; then the merge flag

void stage_float(uint f, float x) { stage_sh[f / 4][f % 4] = x; }

// Row r of the workgroup: token t0 + r / heads_per_group, head h0 + r % heads_per_group.
struct Rows {
  uint t0, t_end, h0, h_end, pos0;
};

bool row_live(Rows g, uint r, out uint q_row, out uint pos) {
  const uint t = g.t0 + r / pc.heads_per_group, h = g.h0 + r % pc.heads_per_group;
  q_row = t * pc.n_q + h;
  pos = g.pos0 + t;
  return r < pc.heads_per_group * pc.tokens_per_group && t < g.t_end && h < g.h_end;
}

// Q and K dims (sl·HALF + u, + d/2) for u < HALF of the tile's keys [base, base + n_tile), at
// float u and HALF + u of their staged rows; zeros past d/2, past the tile and for dead rows.
void stage_qk(Rows g, uint sl, uint base, uint n_tile, uint kv_off) {
  const uint half_d = kD / 2;
  [[unroll]] for (uint it = 0; it < (kQkPairs + kLocal - 1) / kLocal; ++it) {
    const uint idx = gl_LocalInvocationID.x + it * kLocal;
    if (idx >= kQkPairs) break;
    const uint r = idx / kHalf, u = idx % kHalf, e = sl * kHalf + u;
    vec2 x = vec2(0.0);
    if (e < half_d) {
      if (r < kRows) {
        uint q_row, pos;
        if (row_live(g, r, q_row, pos)) x = vec2(q[q_row * kD + e], q[q_row * kD + e + half_d]);
      } else if (r - kRows < n_tile) {
        const uint s = base + (r - kRows);
        x = kv_key_pair(kv_slot(s, pc.slots) * pc.n_kv * kD + kv_off, e, kD, s);
      }
    }
    const uint f = r * (4 * kSliceVecs) + u;
    stage_float(f, x.x);
    stage_float(f + kHalf, x.y);
  }
}

// V rows of keys [base, base + n) as [V_KEYS, V_ROW] floats, zeros past n and past d.
void stage_v(uint base, uint n, uint kv_off) {
  [[unroll]] for (uint it = 0; it < (kVFloats + kLocal - 1) / kLocal; ++it) {
    const uint idx = gl_LocalInvocationID.x + it * kLocal;
    if (idx >= kVFloats) break;
    const uint i = idx / kVRow, e = idx % kVRow;
    float x = 0.0;
    if (i < n && e < kD) x = v_cache[kv_slot(base + i, pc.slots) * pc.n_kv * kD + kv_off + e];
    stage_float(idx, x);
  }
}

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint rb = lid / kKeyGroups, kb = lid % kKeyGroups;
  const uint group = pc.n_q / pc.n_kv;  // query heads per KV head (GQA, contiguous)
  const uint head_groups = (group + pc.heads_per_group - 1) / pc.heads_per_group;
  const uint kvh = gl_WorkGroupID.z / head_groups;
  // Token groups in reverse: the last tokens see the most keys, and start first.
  const uint ty = gl_NumWorkGroups.y - 1 - gl_WorkGroupID.y;
  Rows g;
  g.t0 = ty * pc.tokens_per_group;
  g.t_end = min(g.t0 + pc.tokens_per_group, pc.T);
  g.h0 = kvh * group + (gl_WorkGroupID.z % head_groups) * pc.heads_per_group;
  g.h_end = (kvh + 1) * group;
  g.pos0 = kv_cache_pos0();

  // Keys of this split: [k_begin, k_end) within [lo, p_last], whole tiles a split (attend.comp).
  const uint p_last = g.pos0 + g.t_end - 1;
  const uint p_first = g.pos0 + g.t0;
  const uint lo = (pc.window > 0 && p_first + 1 > pc.window) ? p_first + 1 - pc.window : 0;
  const uint n_keys = p_last + 1 - lo;
  const uint per_split =
      (max((n_keys + pc.n_splits - 1) / pc.n_splits, pc.min_keys) + kTile - 1) / kTile * kTile;
  const uint n_active = (n_keys + per_split - 1) / per_split;
  if (gl_WorkGroupID.x >= n_active) return;  // uniform: the whole workgroup leaves
  const bool direct = n_active == 1;
  const uint k_begin = lo + gl_WorkGroupID.x * per_split;
  const uint k_end = min(k_begin + per_split, p_last + 1);

  uint row_q[4], row_pos[4];
  bool live[4];
  float m_run[4], l_run[4];
  vec4 acc[4 * kDimVecs];
  [[unroll]] for (uint i = 0; i < 4; ++i) {
    live[i] = row_live(g, rb + kRowGroups * i, row_q[i], row_pos[i]);
    m_run[i] = kMasked;
    l_run[i] = 0.0;
    [[unroll]] for (uint c = 0; c < kDimVecs; ++c) acc[i * kDimVecs + c] = vec4(0.0);
  }

  const uint kv_off = kvh * kD;
  for (uint base = k_begin; base < k_end; base += kTile) {
    const uint n_tile = min(kTile, k_end - base);
    // Scores: sc[i][j] = q(row i) · k(key j), a slice of dims at a time.
    vec4 sc[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));
    for (uint sl = 0; sl < kSlices; ++sl) {
      stage_qk(g, sl, base, n_tile, kv_off);
      barrier();
      [[unroll]] for (uint ev = 0; ev < kSlice / 4; ++ev) {
        vec4 qv[4];
        [[unroll]] for (uint i = 0; i < 4; ++i) {
          qv[i] = stage_sh[(rb + kRowGroups * i) * kSliceVecs + ev];
        }
        [[unroll]] for (uint j = 0; j < 4; ++j) {
          const vec4 kv = stage_sh[(kRows + kb + kKeyGroups * j) * kSliceVecs + ev];
          [[unroll]] for (uint i = 0; i < 4; ++i) {
            float s = sc[i][j];
            s += qv[i].x * kv.x;
            s += qv[i].y * kv.y;
            s += qv[i].z * kv.z;
            s += qv[i].w * kv.w;
            sc[i][j] = s;
          }
        }
      }
      barrier();  // the next slice (or the partial maxima) overwrites the staging region
    }

    // Mask, then each row's max over the tile: partials [ROWS, TILE/4] in the staging region.
    [[unroll]] for (uint i = 0; i < 4; ++i) {
      [[unroll]] for (uint j = 0; j < 4; ++j) {
        const uint key = kb + kKeyGroups * j, s = base + key;
        const bool allowed = live[i] && key < n_tile && s <= row_pos[i] &&
                             (pc.window == 0 || s + pc.window > row_pos[i]);
        if (!allowed) sc[i][j] = kMasked;
      }
      const uint r = rb + kRowGroups * i;
      stage_float(r * kKeyGroups + kb, max(max(sc[i].x, sc[i].y), max(sc[i].z, sc[i].w)));
    }
    barrier();
    // Online softmax: the new max, probabilities into P, rescale of the sum and the output.
    [[unroll]] for (uint i = 0; i < 4; ++i) {
      const uint r = rb + kRowGroups * i;
      float mx = m_run[i];
      [[unroll]] for (uint v = 0; v < kKeyGroups / 4; ++v) {
        const vec4 part = stage_sh[r * (kKeyGroups / 4) + v];
        mx = max(mx, max(max(part.x, part.y), max(part.z, part.w)));
      }
      const float alpha = exp(m_run[i] - mx);  // 0 when m_run is kMasked and mx is not
      m_run[i] = mx;
      float sum = 0.0;
      [[unroll]] for (uint j = 0; j < 4; ++j) {
        const float pr = sc[i][j] > kMasked ? exp(sc[i][j] - mx) : 0.0;
        sum += pr;
        const uint f = r * kTile + kb + kKeyGroups * j;
        p_sh[f / 4][f % 4] = pr;
      }
      l_run[i] = l_run[i] * alpha + sum;
      [[unroll]] for (uint c = 0; c < kDimVecs; ++c) acc[i * kDimVecs + c] *= alpha;
    }
    barrier();  // P is complete; the partial maxima are read (the staging region is free)

    // out += P · V, V_KEYS keys at a time.
    for (uint v0 = 0; v0 < n_tile; v0 += kVKeys) {
      const uint nv = min(kVKeys, n_tile - v0);
      stage_v(base + v0, nv, kv_off);
      barrier();
      for (uint k = 0; k < nv; k += 4) {
        vec4 pv[4];
        [[unroll]] for (uint i = 0; i < 4; ++i) {
          pv[i] = p_sh[(rb + kRowGroups * i) * kTileVecs + (v0 + k) / 4];
        }
        [[unroll]] for (uint kk = 0; kk < 4; ++kk) {
          [[unroll]] for (uint c = 0; c < kDimVecs; ++c) {
            const vec4 vv = stage_sh[((k + kk) * kVRow) / 4 + kb + kKeyGroups * c];
            [[unroll]] for (uint i = 0; i < 4; ++i) acc[i * kDimVecs + c] += pv[i][kk] * vv;
          }
        }
      }
      barrier();  // the next V sub-tile or tile overwrites the staging region
    }
  }

  // Each row's sum over the invocations holding it.
  [[unroll]] for (uint i = 0; i < 4; ++i) {
    stage_float((rb + kRowGroups * i) * kKeyGroups + kb, l_run[i]);
  }
  barrier();
  [[unroll]] for (uint i = 0; i < 4; ++i) {
    const uint r = rb + kRowGroups * i;
    float l = 0.0;
    [[unroll]] for (uint v = 0; v < kKeyGroups / 4; ++v) {
      const vec4 part = stage_sh[r * (kKeyGroups / 4) + v];
      l += (part.x + part.y) + (part.z + part.w);
    }
    l_run[i] = l;
  }

  const uint n_rows = pc.T * pc.n_q;
  const uint split_row0 = gl_WorkGroupID.x * n_rows;
  const uint ml0 = pc.n_splits * n_rows * kD;  // (m, l) pairs after the o rows
  [[unroll]] for (uint i = 0; i < 4; ++i) {
    if (!live[i]) continue;
    const uint row = row_q[i];
    [[unroll]] for (uint c = 0; c < kDimVecs; ++c) {
      const uint e = 4 * (kb + kKeyGroups * c);
      if (e >= kD) continue;
      const vec4 o = acc[i * kDimVecs + c];
      [[unroll]] for (uint m = 0; m < 4; ++m) {
        if (direct) {
          out_rows[row * kD + e + m] = o[m] / l_run[i];
        } else {
          scratch[(split_row0 + row) * kD + e + m] = o[m];
        }
      }
    }
    if (!direct && kb == 0) {
      scratch[ml0 + (split_row0 + row) * 2] = m_run[i];
      scratch[ml0 + (split_row0 + row) * 2 + 1] = l_run[i];
    }
  }
  if (direct) return;

  // Count this split in; the last of the `n_active` splits merges (attend.comp).
  memoryBarrierBuffer();
  barrier();
  if (lid == 0) {
    const uint counter = gl_WorkGroupID.y * gl_NumWorkGroups.z + gl_WorkGroupID.z;
    const bool last = atomicAdd(counters[counter], 1u) == n_active - 1;
    if (last) atomicExchange(counters[counter], 0u);  // every split has counted: reset
    p_sh[0].x = last ? 1.0 : 0.0;  // P is free by now: the flag fits in the 48 KB this way
  }
  barrier();
  if (p_sh[0].x == 0.0) return;  // uniform: every invocation reads the same flag
  memoryBarrierBuffer();

  // out = sum_s e^(m_s - M) o_s / sum_s e^(m_s - M) l_s, M = max_s m_s (§4.7: one softmax):
  // weights [ROWS, n_splits] in the staging region, then each invocation its output block.
  for (uint r = lid; r < kRows; r += kLocal) {
    uint row, pos;
    if (!row_live(g, r, row, pos)) continue;
    float m = kMasked;
    for (uint s = 0; s < n_active; ++s) m = max(m, scratch[ml0 + (s * n_rows + row) * 2]);
    float l = 0.0;
    for (uint s = 0; s < n_active; ++s) {
      const uint i = ml0 + (s * n_rows + row) * 2;
      l += exp(scratch[i] - m) * scratch[i + 1];
    }
    for (uint s = 0; s < n_active; ++s) {
      stage_float(r * pc.n_splits + s,
                  exp(scratch[ml0 + (s * n_rows + row) * 2] - m) / l);
    }
  }
  barrier();
  [[unroll]] for (uint i = 0; i < 4; ++i) {
    if (!live[i]) continue;
    const uint r = rb + kRowGroups * i, row = row_q[i];
    [[unroll]] for (uint c = 0; c < kDimVecs; ++c) {
      const uint e = 4 * (kb + kKeyGroups * c);
      if (e >= kD) continue;
      vec4 o = vec4(0.0);
      for (uint s = 0; s < n_active; ++s) {
        const uint f = r * pc.n_splits + s, src = (s * n_rows + row) * kD + e;
        o += stage_sh[f / 4][f % 4] *
             vec4(scratch[src], scratch[src + 1], scratch[src + 2], scratch[src + 3]);
      }
      [[unroll]] for (uint m = 0; m < 4; ++m) out_rows[row * kD + e + m] = o[m];
    }
  }
}
