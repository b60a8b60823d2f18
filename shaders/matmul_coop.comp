// Tiled matrix-matrix product on cooperative matrices (VK_NV_cooperative_matrix: tensor cores),
// for prefill: y[t, r] = sum_c W[r, c] x[t, c], as matmul.comp computes it, but each step's
// tiles are staged in shared memory as f16 pairs (hi + lo, below) and multiplied as 16x16x16
// fragments with f32 accumulation.
//   W: binding 0, [rows, cols] in the device layout of W_* (common/weights.glsl)
//   x: binding 1, [n_tokens, x_stride] f32        y: binding 2, [n_tokens, y_stride] f32
//   GATE_UP only: binding 3, the up matrix, like W (which is then the gate); y = gelu(g) · u
//   push: MatvecPush (matvec.h). spec: LOCAL_SIZE = the tile / 1024 subgroups (size pinned).
// Workgroup (x + z * num_x) owns rows [COOP_ROWS g, ...), workgroup y tokens [COOP_TOKENS y, ...);
// each subgroup 32 tokens x 32 rows of that tile: 2 x 2 fragments. Steps of 64 columns (whole
// GGML blocks), each step's global loads issued while the step before multiplies.
// f16's range bounds activations to |x| < 65504.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

#include "matvec.h"

// Whether the lo halves take part (INFER_MATMUL_COOP_SPEC_SPLIT; off: plain f16 products).
layout(constant_id = INFER_MATMUL_COOP_SPEC_SPLIT) const bool kSplit = true;
// Diagnosis only (INFER_COOP_DEBUG=1): the output is the lo products' sum alone, to see on the
// device whether anything of lo arrives (matvec.cpp).
layout(constant_id = INFER_MATMUL_COOP_SPEC_LO_ONLY) const bool kLoOnly = false;

layout(binding = 1, std430) readonly buffer X { float x[]; };
layout(binding = 2, std430) writeonly buffer Y { float y[]; };

#ifdef GATE_UP
#define W_PAIR
#define W_PAIR_BINDING INFER_MATVEC_BINDING_UP
const uint kMats = 2;
#include "common/gelu.glsl"
#else
const uint kMats = 1;
#endif
#include "common/weights.glsl"

const uint kTokens = INFER_MATMUL_COOP_TOKENS;  // tokens of a workgroup's tile
#ifdef GATE_UP
const uint kRows = INFER_MATMUL_COOP_GATE_UP_ROWS;  // rows of a workgroup's tile
#else
const uint kRows = INFER_MATMUL_COOP_ROWS;
#endif
const uint kSubgroups = kTokens * kRows / 1024;
// Precision: f16 keeps 11 bits, too few for the forward pass's 2e-3 bound on logits. Each
// activation goes in as hi + lo (hi = f16(x), lo = f16(x - hi): ~22 bits), and so do Q8_0/Q4_0
// weights (d · q rounds in f16); bf16 weights are exact in f16. Products: x_hi·w, and x_lo·w +
// x_hi·w_lo for quantized weights in their own accumulators (x_lo·w_lo is below f32 rounding).
#if defined(W_SCALED) || defined(W_F32)  // f32 weights lose 13 bits in f16: split them too
#define W_SPLIT
const uint kCols = 32;  // columns per step: whole GGML blocks; split tiles fit shared memory
#else
const uint kCols = 64;
#endif
const uint kQuads = kCols / 4;
// Shared rows padded by 8 halves (16-byte aligned rows that start on different banks).
const uint kStride = kCols + 8;
const uint kEdgeStride = 20;  // floats, one 16 x 16 fragment of a subgroup at a tile's edge

// The lo parts in arrays of their own (not the upper halves of the hi arrays): on the H200 the
// products erred as plain f16 with them in one array (issue 3; being narrowed down).
shared float16_t x_sh[kTokens * kStride];     // [token][col]
shared float16_t x_lo_sh[kTokens * kStride];  // lo parts, scaled
shared float16_t w_sh[kMats * kRows * kStride];  // [matrix][row][col]
#ifdef W_SPLIT
shared float16_t w_lo_sh[kMats * kRows * kStride];
#endif
shared float edge_sh[kSubgroups * 16 * kEdgeStride];

// Quads each invocation stages per step, loaded one step ahead into registers (raw, undecoded),
// so a step's loads are in flight while the previous step multiplies.
layout(local_size_x_id = INFER_MATMUL_SPEC_LOCAL_SIZE) in;
const uint kWPer = kRows * kQuads / gl_WorkGroupSize.x;
const uint kXPer = kTokens * kQuads / gl_WorkGroupSize.x;

// Fragments are named variables, not arrays: an array of cooperative matrices indexed in loops
// may be placed in local memory.
#define FRAG_A fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define FRAG_ACC fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>

uvec4 w_raw[kMats * kWPer];

// acc += x · W(m)^T over the 16 columns at k, for the 2 x 2 fragments (a/l: x hi/lo rows).
// The lo products go to their own accumulators (d: scaled by kLoScale), added at the end: in
// the hi accumulators they would sit ~2^-11 below the running sums, where the tensor cores'
// alignment of a product to the accumulator truncates them, and unscaled lo values are mostly
// f16 subnormals, which a conversion may flush.
#ifdef W_SPLIT
#define MULTIPLY_LO(m, d00, d01, d10, d11)                                            \
  coopMatLoadNV(b0, w_lo_sh, ((m) * kRows + sr) * kStride + k, kStride, true);         \
  coopMatLoadNV(b1, w_lo_sh, ((m) * kRows + sr + 16) * kStride + k, kStride, true);    \
  d00 = coopMatMulAddNV(a0, b0, d00);                                                  \
  d01 = coopMatMulAddNV(a0, b1, d01);                                                  \
  d10 = coopMatMulAddNV(a1, b0, d10);                                                  \
  d11 = coopMatMulAddNV(a1, b1, d11);
#else
#define MULTIPLY_LO(m, d00, d01, d10, d11)
#endif
#define MULTIPLY(m, c00, c01, c10, c11, d00, d01, d10, d11)                     \
  coopMatLoadNV(b0, w_sh, ((m) * kRows + sr) * kStride + k, kStride, true);      \
  coopMatLoadNV(b1, w_sh, ((m) * kRows + sr + 16) * kStride + k, kStride, true); \
  c00 = coopMatMulAddNV(a0, b0, c00);                                            \
  c01 = coopMatMulAddNV(a0, b1, c01);                                            \
  c10 = coopMatMulAddNV(a1, b0, c10);                                            \
  c11 = coopMatMulAddNV(a1, b1, c11);                                            \
  if (kSplit) {                                                                  \
    d00 = coopMatMulAddNV(l0, b0, d00);                                          \
    d01 = coopMatMulAddNV(l0, b1, d01);                                          \
    d10 = coopMatMulAddNV(l1, b0, d10);                                          \
    d11 = coopMatMulAddNV(l1, b1, d11);                                          \
    MULTIPLY_LO(m, d00, d01, d10, d11)                                           \
  }
vec4 x_raw[kXPer];

// Issues the loads of step c0: weights of rows past the end repeat the last row and columns past
// cols are zeroed when stored; activations past the end are 0.
void load_step(uint row0, uint t0, uint c0) {
  for (uint k = 0; k < kWPer; ++k) {
    const uint i = gl_LocalInvocationID.x + k * gl_WorkGroupSize.x;
    const uint row = min(row0 + i / kQuads, pc.rows - 1), c = c0 + 4 * (i % kQuads);
    const uint cc = min(c, (pc.cols - 1) & ~3u);  // a quad past cols reads a valid one
    w_raw[k] = quad_raw_of(0u, row, cc);
#ifdef GATE_UP
    w_raw[kWPer + k] = quad_raw_of(1u, row, cc);
#endif
  }
  for (uint k = 0; k < kXPer; ++k) {
    const uint i = gl_LocalInvocationID.x + k * gl_WorkGroupSize.x;
    const uint t = i / kQuads, col = c0 + 4 * (i % kQuads), tok = t0 + t;
    vec4 v = vec4(0.0);
    if (tok < pc.n_tokens) {
      const uint b = tok * pc.x_stride + col;
      for (uint e = 0; e < 4; ++e) v[e] = col + e < pc.cols ? x[b + e] : 0.0;
    }
    x_raw[k] = v;
  }
}

// v as f16 pairs hi + lo · 2^-kLoShift (lo = (v - hi) · kLoScale, rounded: a normal f16 where
// v - hi would mostly be subnormal), hi through packHalf2x16's bits so that no compiler can fold
// the f32 -> f16 -> f32 round trip away.
const float kLoScale = 2048.0;
void split_f16(vec4 v, out f16vec4 hi, out f16vec4 lo) {
  const uvec2 bits = uvec2(packHalf2x16(v.xy), packHalf2x16(v.zw));
  const vec4 hi32 = vec4(unpackHalf2x16(bits.x), unpackHalf2x16(bits.y));
  hi = f16vec4(hi32);
  lo = f16vec4((v - hi32) * kLoScale);
}

// Decodes the registers of step c0 into the shared tiles (as f16).
void store_step(uint c0) {
  for (uint k = 0; k < kWPer; ++k) {
    const uint i = gl_LocalInvocationID.x + k * gl_WorkGroupSize.x;
    const uint r = i / kQuads, c = c0 + 4 * (i % kQuads);
    for (uint m = 0; m < kMats; ++m) {
      const vec4 w = c < pc.cols ? quad_from_raw(w_raw[m * kWPer + k], c) : vec4(0.0);
      const uint o = (m * kRows + r) * kStride + c - c0;
#ifdef W_SPLIT
      f16vec4 hi, lo;
      split_f16(w, hi, lo);
      for (uint e = 0; e < 4; ++e) w_lo_sh[o + e] = lo[e];
#else
      const f16vec4 hi = f16vec4(w);  // bf16 weights are exact in f16
#endif
      for (uint e = 0; e < 4; ++e) w_sh[o + e] = hi[e];
    }
  }
  for (uint k = 0; k < kXPer; ++k) {
    const uint i = gl_LocalInvocationID.x + k * gl_WorkGroupSize.x;
    const uint o = (i / kQuads) * kStride + 4 * (i % kQuads);
    f16vec4 hi, lo;
    split_f16(x_raw[k], hi, lo);
    for (uint e = 0; e < 4; ++e) {
      x_sh[o + e] = hi[e];
      x_lo_sh[o + e] = lo[e];
    }
  }
}

// Writes fragment f (tokens tok0.., rows row0..): straight to y when whole and 16-byte aligned,
// else through the subgroup's edge buffer with bounds.
void store_frag(FRAG_ACC f, uint tok0, uint row0) {
  if (tok0 + 16 <= pc.n_tokens && row0 + 16 <= pc.rows && (pc.y_stride & 3u) == 0u) {
    coopMatStoreNV(f, y, tok0 * pc.y_stride + row0, pc.y_stride, false);
    return;
  }
  const uint base = gl_SubgroupID * 16 * kEdgeStride;
  coopMatStoreNV(f, edge_sh, base, kEdgeStride, false);
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  for (uint i = gl_SubgroupInvocationID; i < 256; i += gl_SubgroupSize) {
    const uint t = i / 16, r = i % 16;
    if (tok0 + t < pc.n_tokens && row0 + r < pc.rows) {
      y[(tok0 + t) * pc.y_stride + row0 + r] = edge_sh[base + t * kEdgeStride + r];
    }
  }
  subgroupBarrier();  // the buffer is reused by the next fragment
}

void main() {
  const uint row0 = (gl_WorkGroupID.z * gl_NumWorkGroups.x + gl_WorkGroupID.x) * kRows;
  const uint t0 = gl_WorkGroupID.y * kTokens;
  if (row0 >= pc.rows) return;  // whole workgroup: the grid is rounded up in z
  const uint sg = gl_SubgroupID;
  // Subgroup sg: tokens 32 (sg % 2) .., rows 32 (sg / 2) .. of the tile.
  const uint st = 32 * (sg % 2), sr = 32 * (sg / 2);

  // g<token half><row half>: the product (the gate with GATE_UP); u: the up product.
  FRAG_ACC g00 = FRAG_ACC(0.0), g01 = FRAG_ACC(0.0), g10 = FRAG_ACC(0.0), g11 = FRAG_ACC(0.0);
  FRAG_ACC h00 = FRAG_ACC(0.0), h01 = FRAG_ACC(0.0), h10 = FRAG_ACC(0.0), h11 = FRAG_ACC(0.0);
#ifdef GATE_UP
  FRAG_ACC u00 = FRAG_ACC(0.0), u01 = FRAG_ACC(0.0), u10 = FRAG_ACC(0.0), u11 = FRAG_ACC(0.0);
  FRAG_ACC v00 = FRAG_ACC(0.0), v01 = FRAG_ACC(0.0), v10 = FRAG_ACC(0.0), v11 = FRAG_ACC(0.0);
#endif

  load_step(row0, t0, 0);
  for (uint c0 = 0; c0 < pc.cols; c0 += kCols) {
    store_step(c0);
    barrier();
    if (c0 + kCols < pc.cols) load_step(row0, t0, c0 + kCols);  // in flight while multiplying

    for (uint k = 0; k < kCols; k += 16) {
      FRAG_A a0, a1, l0, l1, b0, b1;
      coopMatLoadNV(a0, x_sh, st * kStride + k, kStride, false);
      coopMatLoadNV(a1, x_sh, (st + 16) * kStride + k, kStride, false);
      if (kSplit) {
        coopMatLoadNV(l0, x_lo_sh, st * kStride + k, kStride, false);
        coopMatLoadNV(l1, x_lo_sh, (st + 16) * kStride + k, kStride, false);
      }
      // B[k][n] = W[row n][col k]: the [row][col] tile read column-major.
      MULTIPLY(0u, g00, g01, g10, g11, h00, h01, h10, h11)
#ifdef GATE_UP
      MULTIPLY(1u, u00, u01, u10, u11, v00, v01, v10, v11)
#endif
    }
    barrier();  // the next step overwrites the tiles
  }

  if (kSplit) {
    // Element by element: glslc -O (spirv-opt) crashes on whole-fragment arithmetic.
    const float unscale = 1.0 / kLoScale;
    const float keep = kLoOnly ? 0.0 : 1.0;
    for (int e = 0; e < g00.length(); ++e) {
      g00[e] = keep * g00[e] + h00[e] * unscale;
      g01[e] = keep * g01[e] + h01[e] * unscale;
      g10[e] = keep * g10[e] + h10[e] * unscale;
      g11[e] = keep * g11[e] + h11[e] * unscale;
#ifdef GATE_UP
      u00[e] = keep * u00[e] + v00[e] * unscale;
      u01[e] = keep * u01[e] + v01[e] * unscale;
      u10[e] = keep * u10[e] + v10[e] * unscale;
      u11[e] = keep * u11[e] + v11[e] * unscale;
#endif
    }
  }
#ifdef GATE_UP
  // Same fragment type, so element e of the gate and of the up fragment are the same output.
  for (int e = 0; e < g00.length(); ++e) {
    g00[e] = gelu_tanh(g00[e]) * u00[e];
    g01[e] = gelu_tanh(g01[e]) * u01[e];
    g10[e] = gelu_tanh(g10[e]) * u10[e];
    g11[e] = gelu_tanh(g11[e]) * u11[e];
  }
#endif
  store_frag(g00, t0 + st, row0 + sr);
  store_frag(g01, t0 + st, row0 + sr + 16);
  store_frag(g10, t0 + st + 16, row0 + sr);
  store_frag(g11, t0 + st + 16, row0 + sr + 16);
}
