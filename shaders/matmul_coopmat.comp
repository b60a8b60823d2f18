// Prefill's matrix-matrix product on cooperative matrices through VK_KHR_cooperative_matrix
// (tensor cores; compiled by glslang 15, subprojects/glslang.wrap, since Debian 12's glslc cannot):
// y[t, r] = sum_c W[r, c] x[t, c] as matmul.comp computes it, with f16 operands and f32
// accumulation, for bf16, Q8_0 and Q4_0 weights.
//   W: binding 0, [rows, cols] in the device layout of W_BF16, W_Q8_0 or W_Q4_0 (common/weights.glsl)
//   x: binding 1, [n_tokens, x_stride] f32 (x_stride and cols multiples of 4)
//   y: binding 2, [n_tokens, y_stride] f32
//   GATE_UP only: binding 3, the up matrix, like W (which is then the gate); y = gelu(g) · u
//   push: MatvecPush (matvec.h); cols a multiple of INFER_MATMUL_COOP_COLS
//   spec: LOCAL_SIZE; ROWS x TOKENS, the workgroup's outputs (of each matrix with GATE_UP);
//   SG_ROWS x SG_TOKENS, a subgroup's (multiples of 16), so LOCAL_SIZE = subgroup size x
//   (ROWS / SG_ROWS) x (TOKENS / SG_TOKENS).
// Workgroup (x + z * num_x) owns rows [ROWS g, ...), workgroup y tokens [TOKENS y, ...). Each step
// of INFER_MATMUL_COOP_COLS columns is staged in shared memory as f16: x converted from f32, W
// decoded (bf16 as it is, Q8_0/Q4_0 as d · q), from registers loaded one step ahead so that the
// loads are in flight while the step before multiplies; each subgroup then multiplies its outputs
// as 16x16x16 fragments, each fragment of x used by every weight fragment of the subgroup.
//
// Every loop over fragments or staged quads is unrolled ([[unroll]]: their bounds are
// specialization constants), so the arrays of fragments and raw quads stay in registers.
//
// Precision: each operand is rounded once to f16, 11 significant bits (bf16 weights are exact in
// it: 8 bits; d · q of a block rounds once), so each product carries a relative error up to
// 2^-10 and a sum of n of them, accumulated in f32, an error up to about 2^-10 · sum |w x|
// (test/gpu/matvec_check.h's bound for products_in_f16). f16's range bounds |x| < 65504.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require

#include "matvec.h"

layout(local_size_x_id = INFER_MATMUL_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_MATMUL_COOP_SPEC_ROWS) const uint kRows = 128;
layout(constant_id = INFER_MATMUL_COOP_SPEC_TOKENS) const uint kTokens = 128;
layout(constant_id = INFER_MATMUL_COOP_SPEC_SG_ROWS) const uint kSgRows = 32;
layout(constant_id = INFER_MATMUL_COOP_SPEC_SG_TOKENS) const uint kSgTokens = 64;

layout(binding = 1, std430) readonly buffer X { vec4 x4[]; };
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
#ifdef W_F32
#error "f32 weights take matmul.comp: their 24 bits do not fit one f16"
#endif

const uint kCols = INFER_MATMUL_COOP_COLS;  // columns a step: whole GGML blocks
const uint kQuads = kCols / 4;
const uint kStride = kCols + INFER_MATMUL_COOP_PAD;  // halves a shared row
const uint kFragRows = kSgRows / 16, kFragTokens = kSgTokens / 16;
const uint kRowSubgroups = kRows / kSgRows;
const uint kSubgroups = kRowSubgroups * (kTokens / kSgTokens);
// The tiles hold quads (4 columns as f16) as uvec2, one 8-byte store a quad; the fragment loads
// read them as f16, offsets and strides in quads. x [token][col], then W [matrix][row][col].
const uint kWOff = kTokens * kStride;  // halves
shared uvec2 sh_t[(kTokens + kMats * kRows) * kStride / 4];
const uint kEdgeStride = 16;  // one 16 x 16 f32 fragment a subgroup, for outputs at the edges
shared float sh_edge[kSubgroups * 16 * kEdgeStride];

#define FRAG_X coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FRAG_W coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define FRAG_Y coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

// Quads each invocation stages a step (the host takes only tiles whose quads divide among the
// invocations), loaded raw one step ahead: W its two words (bf16: the weights; Q8_0/Q4_0: the
// quant word and the block's scale word), x its f32 quad.
const uint kWPer = kRows * kQuads / gl_WorkGroupSize.x;
const uint kXPer = kTokens * kQuads / gl_WorkGroupSize.x;
uvec2 w_raw[kMats * kWPer];
vec4 x_raw[kXPer];

// Issues the loads of step c0: weights of rows past the end repeat the last row, activations of
// tokens past the end are 0.
void load_step(uint row0, uint t0, uint c0) {
  [[unroll]] for (uint k = 0; k < kWPer; ++k) {
    const uint i = gl_LocalInvocationID.x + k * gl_WorkGroupSize.x;
    const uint row = min(row0 + i / kQuads, pc.rows - 1), c = c0 + 4 * (i % kQuads);
    w_raw[k] = quad_raw_of(0u, row, c).xy;
#ifdef GATE_UP
    w_raw[kWPer + k] = quad_raw_of(1u, row, c).xy;
#endif
  }
  [[unroll]] for (uint k = 0; k < kXPer; ++k) {
    const uint i = gl_LocalInvocationID.x + k * gl_WorkGroupSize.x;
    const uint tok = t0 + i / kQuads, col = c0 + 4 * (i % kQuads);
    x_raw[k] = tok < pc.n_tokens ? x4[(tok * pc.x_stride + col) / 4] : vec4(0.0);
  }
}

#define STORE_QUAD(o, v) sh_t[(o) / 4] = uvec2(packHalf2x16((v).xy), packHalf2x16((v).zw))

// Decodes the registers of step c0 into the shared tiles as f16.
void store_step(uint c0) {
  [[unroll]] for (uint k = 0; k < kWPer; ++k) {
    const uint i = gl_LocalInvocationID.x + k * gl_WorkGroupSize.x;
    const uint r = i / kQuads, q = i % kQuads;
    [[unroll]] for (uint m = 0; m < kMats; ++m) {
      const vec4 w = quad_from_raw(uvec4(w_raw[m * kWPer + k], 0u, 0u), c0 + 4 * q);
      STORE_QUAD(kWOff + (m * kRows + r) * kStride + 4 * q, w);
    }
  }
  [[unroll]] for (uint k = 0; k < kXPer; ++k) {
    const uint i = gl_LocalInvocationID.x + k * gl_WorkGroupSize.x;
    STORE_QUAD((i / kQuads) * kStride + 4 * (i % kQuads), x_raw[k]);
  }
}

// Writes fragment f (tokens tok0.., rows row0..): straight to y when whole and 16-byte aligned,
// else through the subgroup's edge buffer with bounds.
void store_frag(FRAG_Y f, uint tok0, uint row0) {
  if (tok0 + 16 <= pc.n_tokens && row0 + 16 <= pc.rows && (pc.y_stride & 3u) == 0u) {
    coopMatStore(f, y, tok0 * pc.y_stride + row0, pc.y_stride, gl_CooperativeMatrixLayoutRowMajor);
    return;
  }
  const uint base = gl_SubgroupID * 16 * kEdgeStride;
  coopMatStore(f, sh_edge, base, kEdgeStride, gl_CooperativeMatrixLayoutRowMajor);
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  for (uint i = gl_SubgroupInvocationID; i < 256; i += gl_SubgroupSize) {
    const uint t = i / 16, r = i % 16;
    if (tok0 + t < pc.n_tokens && row0 + r < pc.rows) {
      y[(tok0 + t) * pc.y_stride + row0 + r] = sh_edge[base + t * kEdgeStride + r];
    }
  }
  subgroupBarrier();  // the buffer is reused by the next fragment
}

void main() {
  const uint row0 = (gl_WorkGroupID.z * gl_NumWorkGroups.x + gl_WorkGroupID.x) * kRows;
  const uint t0 = gl_WorkGroupID.y * kTokens;
  if (row0 >= pc.rows) return;  // whole workgroup: the grid is rounded up in z
  const uint sg = gl_SubgroupID;
  const uint sr = kSgRows * (sg % kRowSubgroups), st = kSgTokens * (sg / kRowSubgroups);

  // acc[(m * kFragRows + i) * kFragTokens + j]: matrix m, rows sr + 16 i, tokens st + 16 j.
  FRAG_Y acc[kMats * kFragRows * kFragTokens];
  [[unroll]] for (uint i = 0; i < kMats * kFragRows * kFragTokens; ++i) acc[i] = FRAG_Y(0.0);

  load_step(row0, t0, 0);
  for (uint c0 = 0; c0 < pc.cols; c0 += kCols) {
    store_step(c0);
    barrier();
    if (c0 + kCols < pc.cols) load_step(row0, t0, c0 + kCols);  // in flight while multiplying
    [[unroll]] for (uint k = 0; k < kCols; k += 16) {
      FRAG_X a[kFragTokens];
      [[unroll]] for (uint j = 0; j < kFragTokens; ++j) {
        coopMatLoad(a[j], sh_t, ((st + 16 * j) * kStride + k) / 4, kStride / 4,
                    gl_CooperativeMatrixLayoutRowMajor);
      }
      [[unroll]] for (uint m = 0; m < kMats; ++m) {
        [[unroll]] for (uint i = 0; i < kFragRows; ++i) {
          // B[k][n] = W[row n][col k]: the [row][col] tile read column-major.
          FRAG_W b;
          coopMatLoad(b, sh_t, (kWOff + (m * kRows + sr + 16 * i) * kStride + k) / 4,
                      kStride / 4, gl_CooperativeMatrixLayoutColumnMajor);
          [[unroll]] for (uint j = 0; j < kFragTokens; ++j) {
            const uint f = (m * kFragRows + i) * kFragTokens + j;
            acc[f] = coopMatMulAdd(a[j], b, acc[f]);
          }
        }
      }
    }
    barrier();  // the next step overwrites the tiles
  }

  [[unroll]] for (uint i = 0; i < kFragRows; ++i) {
    [[unroll]] for (uint j = 0; j < kFragTokens; ++j) {
      FRAG_Y g = acc[i * kFragTokens + j];
#ifdef GATE_UP
      // Gate and up fragments of one type: element e of each is the same output.
      const FRAG_Y u = acc[(kFragRows + i) * kFragTokens + j];
      [[unroll]] for (int e = 0; e < g.length(); ++e) g[e] = gelu_tanh(g[e]) * u[e];
#endif
      store_frag(g, t0 + st + 16 * j, row0 + sr + 16 * i);
    }
  }
}
