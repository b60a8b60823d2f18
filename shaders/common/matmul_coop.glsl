// The body of the tiled matrix-matrix product on cooperative matrices (VK_NV_cooperative_matrix:
// tensor cores), for prefill: y[t, r] = sum_c W[r, c] x[t, c], as matmul.comp computes it, with
// each step's tiles staged in shared memory as f16 and multiplied as 16x16x16 fragments, f32
// accumulation. Its two axes are the weights' format and GATE_UP; the activations' form is the
// includer's: matmul_coop.comp (f16 hi + lo pairs) or matmul_coop_int8.comp (GGML Q8_0 blocks).
//   W: binding 0, [rows, cols] in the device layout of W_BF16, W_Q8_0 or W_Q4_0
//      (common/weights.glsl; f32 weights take matmul.comp)
//   x: binding 1, the activations [n_tokens, cols] as coop_x_prep.comp prepares them
//   y: binding 2, [n_tokens, y_stride] f32
//   GATE_UP only: binding 3, the up matrix, like W (which is then the gate); y = gelu(g) · u
//   push: MatvecPush (matvec.h). spec: ROWS x TOKENS, the workgroup's tile (multiples of 32);
//   LOCAL_SIZE, its subgroups (below) of the pinned size 32; LO_PRODUCTS (matmul_coop.comp).
// Workgroup (x + z * num_x) owns rows [ROWS g, ...), workgroup y tokens [TOKENS y, ...); each
// subgroup 32 tokens of that tile x 32 rows, or with GATE_UP 16 rows of both matrices: 2 x 2
// fragments either way (gate and up of the same rows side by side, so the epilogue pairs them
// element by element and no subgroup holds more accumulators than a plain product's). Steps of
// 64 columns (two GGML blocks), each step's global loads issued while the step before multiplies.
// Weights go in exactly: bf16 is exact in f16, and a Q8_0/Q4_0 block's integers are, so a
// block's products are summed unscaled and its f32 scale applied by the ALU (a fragment of the
// rows' scales, the same scale down each column), where d · q in f16 would round every weight.
//
// The includer defines, before including this (after #version and the extensions):
//   X_BUFFERS      binding 1's declarations
//   X_TILE_LAYOUT  the constants kLoUsed (LO_PRODUCTS, or 0), kXLoOff (the lo parts' tile),
//                  kWOff (the weights' tile, after x's) and kXdFloats (activation scales a step)
//   X_REGISTERS    x_raw (and its scales), one step's quads an invocation, loaded ahead
//   X_LOAD(k, q, live, col)  load quad q of x (0 where !live) into register k
//   X_STORE(k, i, o)         store register k (invocation quad i) at half o of x's tiles
//   BLOCK_XD(t), BLOCK_SCALE(s, e)  a block sum's scale: the weights' s[e], or times the tokens'
#include "matvec.h"

layout(constant_id = INFER_MATMUL_COOP_SPEC_LO_PRODUCTS) const uint kLoProducts = 1;
layout(constant_id = INFER_MATMUL_COOP_SPEC_ROWS) const uint kRows = 64;  // tile rows
layout(constant_id = INFER_MATMUL_COOP_SPEC_TOKENS) const uint kTokens = 64;  // tile tokens

X_BUFFERS  // binding 1, x as coop_x_prep.comp prepared it
layout(binding = 2, std430) writeonly buffer Y { float y[]; };

#ifdef GATE_UP
#define W_PAIR
#define W_PAIR_BINDING INFER_MATVEC_BINDING_UP
const uint kMats = 2;
#include "common/gelu.glsl"
#else
const uint kMats = 1;
#endif
#define WEIGHTS_F16_QUADS  // quad_q16_from_raw
#include "common/weights.glsl"
#ifdef W_F32
#error "f32 weights take matmul.comp: their 24 bits do not fit one f16"
#endif

#ifdef GATE_UP
const uint kSubgroupRows = 16;  // of each matrix
#else
const uint kSubgroupRows = 32;
#endif
const uint kSubgroups = kTokens / 32 * (kRows / kSubgroupRows);
// Subgroup s: tokens 32 (s % this) .., rows kSubgroupRows (s / this) ..
const uint kTokenSubgroups = kTokens / 32;
const uint kCols = INFER_MATMUL_COOP_COLS;  // columns per step: whole GGML blocks
const uint kBlocks = kCols / 32;
const uint kQuads = kCols / 4;
const uint kStride = kCols + INFER_MATMUL_COOP_PAD;  // halves a shared row
const uint kEdgeStride = 16;  // floats, one 16 x 16 fragment of a subgroup at a tile's edge

// The tiles hold quads (4 columns as f16) as uvec2: the staging stores each quad with one 8-byte
// store where four f16 stores took four, and the fragment loads read the uvec2 array as f16,
// offsets and strides in quads (H200: 12B Q4_0 prefill 2,593 vs 2,521 t/s with f16
// tiles, bf16 3,590 vs 3,535 with the same stores through aliased f16vec4 / f16 blocks). Offsets
// below in halves; the floats (block scales, edge fragments) in an array of their own.
const uint kXHalves = kTokens * kStride;
const uint kXOff = 0;  // [token][col], hi parts (int8 activations: the integers)
X_TILE_LAYOUT  // kLoUsed, kXLoOff, kWOff, kXdFloats
const uint kWHalves = kMats * kRows * kStride;  // [matrix][row][col]: bf16, or block integers
const uint kDOff = 0;  // floats: [matrix][block of the step][row], the block scales
#ifdef W_SCALED
const uint kDFloats = kMats * kBlocks * kRows;
#else
const uint kDFloats = 0;
#endif
const uint kXdOff = kDOff + kDFloats;
const uint kTileFloats = kXdOff + kXdFloats, kEdgeFloats = kSubgroups * 16 * kEdgeStride;
const uint kEdgeOff = kTileFloats;  // floats: one 16 x 16 fragment a subgroup
shared uvec2 sh_t[(kWOff + kWHalves) / 4];
shared float sh_f[kTileFloats + kEdgeFloats];
#define TILE_LOAD(f, o, cm) coopMatLoadNV(f, sh_t, (o) / 4, kStride / 4, cm)

// Quads each invocation stages per step, loaded one step ahead into registers (raw, undecoded),
// so a step's loads are in flight while the previous step multiplies.
layout(local_size_x_id = INFER_MATMUL_SPEC_LOCAL_SIZE) in;
// (The host takes only tiles whose quads divide among the invocations: a bounds check here,
// `break` in these loops, cost 9% on the H200.)
const uint kWPer = kRows * kQuads / gl_WorkGroupSize.x;
const uint kXPer = kTokens * kQuads / gl_WorkGroupSize.x;

// Fragments are named variables, not arrays: an array of cooperative matrices indexed in loops
// may be placed in local memory.
#define FRAG_A fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define FRAG_ACC fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>

uvec4 w_raw[kMats * kWPer];  // Q8_0/Q4_0: the quant word alone (.x)
#ifdef W_SCALED
// Each block's scale is loaded once, by one invocation (kDPer blocks each), not with each of its
// 8 quads (H200: 12B Q4_0 prefill 2,868 / 2,883 vs 2,600 / 2,611 t/s, Q8_0 2,888 vs
// 2,583, E2B Q4_0 10,802 vs 9,881; 164 registers where 171).
const uint kDPer = (kMats * kBlocks * kRows + gl_WorkGroupSize.x - 1) / gl_WorkGroupSize.x;
float d_raw[kDPer];
#endif
X_REGISTERS  // x_raw (and xd_raw)

// Issues the loads of step c0: weights of rows past the end repeat the last row and columns past
// cols are zeroed when stored; activations past the end are 0.
void load_step(uint row0, uint t0, uint c0) {
  for (uint k = 0; k < kWPer; ++k) {
    const uint i = gl_LocalInvocationID.x + k * gl_WorkGroupSize.x;
    const uint row = min(row0 + i / kQuads, pc.rows - 1), c = c0 + 4 * (i % kQuads);
    const uint cc = min(c, (pc.cols - 1) & ~3u);  // a quad past cols reads a valid one
#ifdef W_SCALED
    w_raw[k] = uvec4(quad_word_of(0u, row, cc), 0u, 0u, 0u);
#ifdef GATE_UP
    w_raw[kWPer + k] = uvec4(quad_word_of(1u, row, cc), 0u, 0u, 0u);
#endif
#else
    w_raw[k] = quad_raw_of(0u, row, cc);
#ifdef GATE_UP
    w_raw[kWPer + k] = quad_raw_of(1u, row, cc);
#endif
#endif
  }
#ifdef W_SCALED
  for (uint j = 0; j < kDPer; ++j) {  // [matrix][block][row], as sh_f holds them
    const uint i = gl_LocalInvocationID.x + j * gl_WorkGroupSize.x;
    if (kDPer * gl_WorkGroupSize.x == kMats * kBlocks * kRows || i < kMats * kBlocks * kRows) {
      const uint m = i / (kBlocks * kRows), b = (i / kRows) % kBlocks;
      d_raw[j] = block_scale_of(m, min(row0 + i % kRows, pc.rows - 1), c0 + 32 * b);
    }
  }
#endif
  for (uint k = 0; k < kXPer; ++k) {
    const uint i = gl_LocalInvocationID.x + k * gl_WorkGroupSize.x;
    const uint t = i / kQuads, col = c0 + 4 * (i % kQuads), tok = t0 + t;
    const bool live = tok < pc.n_tokens;  // cols is a multiple of kCols (coop_path)
    const uint q = tok * (pc.cols / 4) + col / 4;
    X_LOAD(k, q, live, col)
  }
}

const float kLoScale = INFER_MATMUL_COOP_LO_SCALE;  // LO_PRODUCTS 2's lo parts (coop_x_prep.comp)

// Stores quad q at half o (a multiple of 4) of the shared region.
#define tile_store(o, q) sh_t[(o) / 4] = uvec2(packFloat2x16((q).xy), packFloat2x16((q).zw))

// Decodes the registers of step c0 into the shared tiles (as f16; quantized: the integers, and
// the blocks' scales).
void store_step(uint c0) {
  for (uint k = 0; k < kWPer; ++k) {
    const uint i = gl_LocalInvocationID.x + k * gl_WorkGroupSize.x;
    const uint r = i / kQuads, c = c0 + 4 * (i % kQuads);
    for (uint m = 0; m < kMats; ++m) {
      const uvec4 raw = w_raw[m * kWPer + k];
      const uint o = kWOff + (m * kRows + r) * kStride + c - c0;
      const f16vec4 q = c < pc.cols ? quad_q16_from_raw(raw, c) : f16vec4(0.0);
      tile_store(o, q);
    }
  }
#ifdef W_SCALED
  for (uint j = 0; j < kDPer; ++j) {
    const uint i = gl_LocalInvocationID.x + j * gl_WorkGroupSize.x;
    if (kDPer * gl_WorkGroupSize.x == kMats * kBlocks * kRows || i < kMats * kBlocks * kRows) {
      sh_f[kDOff + i] = d_raw[j];
    }
  }
#endif
  for (uint k = 0; k < kXPer; ++k) {
    const uint i = gl_LocalInvocationID.x + k * gl_WorkGroupSize.x;
    const uint o = (i / kQuads) * kStride + 4 * (i % kQuads);
    X_STORE(k, i, o)
  }
}

// Writes fragment f (tokens tok0.., rows row0..): straight to y when whole and 16-byte aligned,
// else through the subgroup's edge buffer with bounds.
void store_frag(FRAG_ACC f, uint tok0, uint row0) {
  if (tok0 + 16 <= pc.n_tokens && row0 + 16 <= pc.rows && (pc.y_stride & 3u) == 0u) {
    coopMatStoreNV(f, y, tok0 * pc.y_stride + row0, pc.y_stride, false);
    return;
  }
  const uint base = kEdgeOff + gl_SubgroupID * 16 * kEdgeStride;
  coopMatStoreNV(f, sh_f, base, kEdgeStride, false);
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  for (uint i = gl_SubgroupInvocationID; i < 256; i += gl_SubgroupSize) {
    const uint t = i / 16, r = i % 16;
    if (tok0 + t < pc.n_tokens && row0 + r < pc.rows) {
      y[(tok0 + t) * pc.y_stride + row0 + r] = sh_f[base + t * kEdgeStride + r];
    }
  }
  subgroupBarrier();  // the buffer is reused by the next fragment
}

// Products over columns [k0, k0 + n) of the step, of x's hi parts (into c..) and lo parts
// (LO_PRODUCTS 1: into c.., LO_PRODUCTS 2: into d..) with the staged W rows w0.. (c.0) and w1..
// (c.1), 16 each (B[k][n] = W[row n][col k]: the [row][col] tile read column-major). Fragments are
// loaded into variables of their own, each written once.
#define MULTIPLY(w0, w1, k0, n, c00, c01, c10, c11, d00, d01, d10, d11)                  \
  for (uint k = (k0); k < (k0) + (n); k += 16) {                                          \
    FRAG_A a0, a1, b0, b1;                                                                \
    TILE_LOAD(a0, kXOff + st * kStride + k, false);                                       \
    TILE_LOAD(a1, kXOff + (st + 16) * kStride + k, false);                                \
    TILE_LOAD(b0, kWOff + (w0) * kStride + k, true);                                      \
    TILE_LOAD(b1, kWOff + (w1) * kStride + k, true);                                      \
    c00 = coopMatMulAddNV(a0, b0, c00);                                                   \
    c01 = coopMatMulAddNV(a0, b1, c01);                                                   \
    c10 = coopMatMulAddNV(a1, b0, c10);                                                   \
    c11 = coopMatMulAddNV(a1, b1, c11);                                                   \
    if (kLoUsed != 0u) {                                                                  \
      FRAG_A l0, l1;                                                                      \
      TILE_LOAD(l0, kXLoOff + st * kStride + k, false);                                   \
      TILE_LOAD(l1, kXLoOff + (st + 16) * kStride + k, false);                            \
      if (kLoUsed == 1u) {                                                                \
        c00 = coopMatMulAddNV(l0, b0, c00);                                               \
        c01 = coopMatMulAddNV(l0, b1, c01);                                               \
        c10 = coopMatMulAddNV(l1, b0, c10);                                               \
        c11 = coopMatMulAddNV(l1, b1, c11);                                               \
      } else {                                                                            \
        d00 = coopMatMulAddNV(l0, b0, d00);                                               \
        d01 = coopMatMulAddNV(l0, b1, d01);                                               \
        d10 = coopMatMulAddNV(l1, b0, d10);                                               \
        d11 = coopMatMulAddNV(l1, b1, d11);                                               \
      }                                                                                   \
    }                                                                                     \
  }

// Quantized weights, token half t (tokens t..t+15 of the tile) of block b, both fragment columns:
// each column's block sum c (LO_PRODUCTS 2: lo sums d) scaled into g0 / g1 by the rows' block
// scales (BLOCK_SCALE: times the tokens' for int8 activations), a stride-0 load, element by
// element (glslc -O crashes on whole-fragment arithmetic; one fragment type, so element e of each
// is the same output). Only LO_PRODUCTS 2 reads d: c + 0 · unscale is an add the driver may not
// fold (c + 0 is not c for c = -0).
#define BLOCK_COL(g, bk0, bk1, w)                                                          \
  {                                                                                         \
    FRAG_ACC c = FRAG_ACC(0.0), d = FRAG_ACC(0.0), s;                                      \
    c = coopMatMulAddNV(a0, bk0, c);                                                        \
    if (kLoUsed == 1u) c = coopMatMulAddNV(l0, bk0, c);                                     \
    if (kLoUsed == 2u) d = coopMatMulAddNV(l0, bk0, d);                                     \
    c = coopMatMulAddNV(a1, bk1, c);                                                        \
    if (kLoUsed == 1u) c = coopMatMulAddNV(l1, bk1, c);                                     \
    if (kLoUsed == 2u) d = coopMatMulAddNV(l1, bk1, d);                                     \
    for (int e = 0; kLoUsed == 2u && e < c.length(); ++e) c[e] += d[e] * unscale;          \
    coopMatLoadNV(s, sh_f, kDOff + ((w) / kRows * kBlocks + b) * kRows + (w) % kRows, 0,   \
                  false);                                                                   \
    for (int e = 0; e < c.length(); ++e) g[e] += c[e] * BLOCK_SCALE(s, e);                 \
  }
#define BLOCK_HALF(t, g0, g1)                                                              \
  {                                                                                         \
    FRAG_A a0, a1, l0, l1;                                                                  \
    TILE_LOAD(a0, kXOff + (t) * kStride + k0, false);                                       \
    TILE_LOAD(a1, kXOff + (t) * kStride + k0 + 16, false);                                  \
    if (kLoUsed != 0u) {                                                                    \
      TILE_LOAD(l0, kXLoOff + (t) * kStride + k0, false);                                   \
      TILE_LOAD(l1, kXLoOff + (t) * kStride + k0 + 16, false);                              \
    }                                                                                       \
    BLOCK_XD(t)                                                                             \
    BLOCK_COL(g0, b00, b01, w0)                                                             \
    BLOCK_COL(g1, b10, b11, w1)                                                             \
  }

void main() {
  const uint row0 = (gl_WorkGroupID.z * gl_NumWorkGroups.x + gl_WorkGroupID.x) * kRows;
  const uint t0 = gl_WorkGroupID.y * kTokens;
  if (row0 >= pc.rows) return;  // whole workgroup: the grid is rounded up in z
  const uint sg = gl_SubgroupID;
  const uint st = 32 * (sg % kTokenSubgroups), sr = kSubgroupRows * (sg / kTokenSubgroups);
  const float unscale = 1.0 / kLoScale;
  // The staged rows of the subgroup's fragment columns 0 and 1: rows sr and sr + 16, or with
  // GATE_UP rows sr of the gate and of the up matrix.
#ifdef GATE_UP
  const uint w0 = sr, w1 = kRows + sr;
#else
  const uint w0 = sr, w1 = sr + 16;
#endif

  // g<token half><fragment column>: the sums (f16 lo parts in them but with LO_PRODUCTS 2).
  FRAG_ACC g00 = FRAG_ACC(0.0), g01 = FRAG_ACC(0.0), g10 = FRAG_ACC(0.0), g11 = FRAG_ACC(0.0);
#ifndef W_SCALED
  // LO_PRODUCTS 2: the lo products over the whole row (unscaled weights need no per-block step).
  FRAG_ACC h00 = FRAG_ACC(0.0), h01 = FRAG_ACC(0.0), h10 = FRAG_ACC(0.0), h11 = FRAG_ACC(0.0);
#endif

  // (Loading each step after the last one's products, no registers held across them, was
  // slower: 12B Q4_0 2,309 vs 2,515 t/s.)
  load_step(row0, t0, 0);
  for (uint c0 = 0; c0 < pc.cols; c0 += kCols) {
    store_step(c0);
    barrier();
    if (c0 + kCols < pc.cols) load_step(row0, t0, c0 + kCols);  // in flight while multiplying

#ifdef W_SCALED
    for (uint b = 0; b < kBlocks; ++b) {
      // One output fragment at a time: its block sum in one temporary accumulator (c, and
      // LO_PRODUCTS 2's lo sums in d), scaled into g.. at once, so only one temporary is live
      // (H200: 12B Q4_0 prefill 2,934 / 2,932 t/s vs 2,881 / 2,879 with four, one a fragment).
      const uint k0 = 32 * b;
      FRAG_A b00, b01, b10, b11;  // b<fragment column><k-step>
      TILE_LOAD(b00, kWOff + w0 * kStride + k0, true);
      TILE_LOAD(b01, kWOff + w0 * kStride + k0 + 16, true);
      TILE_LOAD(b10, kWOff + w1 * kStride + k0, true);
      TILE_LOAD(b11, kWOff + w1 * kStride + k0 + 16, true);
      BLOCK_HALF(st, g00, g01)
      BLOCK_HALF(st + 16, g10, g11)
    }
#else
    MULTIPLY(w0, w1, 0, kCols, g00, g01, g10, g11, h00, h01, h10, h11)
#endif
    barrier();  // the next step overwrites the tiles
  }

#ifndef W_SCALED
  for (int e = 0; kLoProducts == 2u && e < g00.length(); ++e) {
    g00[e] += h00[e] * unscale;
    g01[e] += h01[e] * unscale;
    g10[e] += h10[e] * unscale;
    g11[e] += h11[e] * unscale;
  }
#endif
#ifdef GATE_UP
  for (int e = 0; e < g00.length(); ++e) {
    g00[e] = gelu_tanh(g00[e]) * g01[e];
    g10[e] = gelu_tanh(g10[e]) * g11[e];
  }
  store_frag(g00, t0 + st, row0 + sr);
  store_frag(g10, t0 + st + 16, row0 + sr);
#else
  store_frag(g00, t0 + st, row0 + sr);
  store_frag(g01, t0 + st, row0 + sr + 16);
  store_frag(g10, t0 + st + 16, row0 + sr);
  store_frag(g11, t0 + st + 16, row0 + sr + 16);
#endif
}
