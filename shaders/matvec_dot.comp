// Matrix-vector (T = 1) and small-T product for Q8_0/Q4_0 weights with integer dot products:
// activations are quantized to Q8_0 blocks of 32 (common/quant_x.glsl: the CPU's bits), so each
// quad of 4 weights costs one 4 x int8 dot product (OpSDot) instead of 4 decodes and 4 fmas.
//   W: binding 0, [rows, cols] Q8_0 or Q4_0 in the device layout (common/weights.glsl)
//   x: binding 1, quantized once for every workgroup by the dispatch before (shaders/
//      coop_x_prep.comp's INT8 output, or add_norm's): the int8 quads as words
//      [n_tokens][cols / 4], then the f32 scales [n_tokens][cols / 32]
//   y: binding 2, like matvec.comp
//   GATE_UP only: binding 3, the up matrix; y = gelu(gate · x) · (up · x)
//   push: MatvecPush (matvec.h). spec: as matvec.comp.
// Rows go to subgroups as in matvec.comp: lane l takes vectors l, l + S, ..., ROWS rows (x2 for
// gate-up) at a time, and each quad's int sum meets its two scales in f32: y = sum over blocks
// of dot · d_w · d_x. Quantizing x in every workgroup's prologue instead (no dispatch before)
// was slower on a big GPU: each workgroup redid the work before its first product.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_spirv_intrinsics : require
#extension GL_KHR_memory_scope_semantics : require

#include "matvec.h"

layout(local_size_x_id = INFER_MATVEC_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_MATVEC_SPEC_ROWS) const uint kRows = 1;
layout(constant_id = INFER_MATVEC_SPEC_TOKENS) const uint kTokens = 1;
layout(constant_id = INFER_MATVEC_SPEC_SUBGROUPS) const uint kSubgroups = 1;

layout(binding = 1, std430) readonly buffer XQ { uint xq_words[]; };
layout(binding = 1, std430) readonly buffer XD { float xq_scales[]; };
layout(binding = 2, std430) writeonly buffer Y { float y[]; };

#ifdef GATE_UP
#define W_PAIR
#define W_PAIR_BINDING INFER_MATVEC_BINDING_UP
const uint kMats = 2;  // gate, then up
#include "common/gelu.glsl"
#else
const uint kMats = 1;
#endif
#include "common/weights.glsl"

#if !defined(W_Q8_0) && !defined(W_Q4_0)
#error "matvec_dot.comp takes W_Q8_0 or W_Q4_0"
#endif

// OpSDot (SPV_KHR_integer_dot_product, core in SPIR-V 1.6) on 4 x int8 packed in a uint
// (PackedVectorFormat4x8Bit = 0); capabilities DotProductInput4x8BitPacked and DotProduct.
// Debian's glslc predates GL_EXT_integer_dot_product, so it is declared by opcode.
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6018, 6019],
                  id = 4450)
int sdot(uint a, uint b, spirv_literal int packed_format);

// (M + n) as f32 bits is exactly M + n for |n| < 2^22 with M = 1.5 · 2^23: an int sum becomes a
// float with an integer add (folded into the dot product's accumulator) and one f32 subtraction
// instead of a quarter-rate conversion. A block dot is at most 32 · 128 · 127 < 2^22.
const int kMagicBits = 0x4B400000;
const float kMagicF = 12582912.0;

const uint kLoads = kMats * VEC_UNROLL * kRows;  // weight vectors in flight per lane

// The prepared x of quad c (columns c..c+3) and of its block, token t; columns past cols (the
// last group's padding, zero weights) read the last quad, any finite value.
uint x_word(uint t, uint c) { return xq_words[t * (pc.cols / 4) + min(c, pc.cols - 4) / 4]; }
float x_scale(uint t, uint c) {
  return xq_scales[pc.n_tokens * (pc.cols / 4) + t * (pc.cols / 32) + min(c, pc.cols - 4) / 32];
}

// The activations of vector jc of token t: Q8_0 its 4 quads (xw) and their block scales (dx);
// Q4_0 its 8 quads (xw0 0-3, xw1 4-7) and their block scales (dx0, dx1), quad q being block q of
// the group.
#if defined(W_Q8_0)
void load_x_vec(uint t, uint jc, out uvec4 xw, out vec4 dx) {
  for (uint q = 0; q < 4; ++q) {
    const uint c = vec_quad_col(jc, q);
    xw[q] = x_word(t, c);
    dx[q] = x_scale(t, c);
  }
}
#else
void load_x_vec(uint t, uint jc, out uvec4 xw0, out uvec4 xw1, out vec4 dx0, out vec4 dx1) {
  for (uint q = 0; q < 4; ++q) {
    const uint c0 = vec_quad_col(jc, q), c1 = vec_quad_col(jc, q + 4);
    xw0[q] = x_word(t, c0);
    xw1[q] = x_word(t, c1);
    dx0[q] = x_scale(t, c0);
    dx1[q] = x_scale(t, c1);
  }
}
#endif

// The weight vectors (and their groups' scales) of one step of a lane: VEC_UNROLL vectors from
// j0 at subgroup stride, of each row and matrix; a vector past the row repeats the last (its sum
// is dropped).
void load_step(uint row0, uint j0, inout uvec4 wv[kLoads], inout uvec4 sv[kLoads]) {
  for (uint u = 0; u < VEC_UNROLL; ++u) {
    const uint j = min(j0 + u * gl_SubgroupSize, w_vecs() - 1);
    for (uint m = 0; m < kMats; ++m) {
      for (uint r = 0; r < kRows; ++r) {
        const uint row = min(row0 + r, pc.rows - 1);  // rows past the end repeat the last
        wv[(m * VEC_UNROLL + u) * kRows + r] = load_vec_of(m, row, j);
        sv[(m * VEC_UNROLL + u) * kRows + r] = load_scales_of(m, row, j);
      }
    }
  }
}

void main() {
  const uint lanes = gl_SubgroupSize, lane = gl_SubgroupInvocationID;
  const uint group = gl_WorkGroupID.z * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  const uint t0 = gl_WorkGroupID.y * kTokens;
  const uint n_vecs = w_vecs();

  uvec4 wv[kLoads], sv[kLoads];
  const uint first_row0 = (group * kSubgroups + gl_SubgroupID) * kRows;
  if (gl_SubgroupID < kSubgroups && first_row0 < pc.rows) load_step(first_row0, lane, wv, sv);

  for (uint slot = gl_SubgroupID; slot < kSubgroups; slot += gl_NumSubgroups) {
    const uint row0 = (group * kSubgroups + slot) * kRows;
    if (row0 >= pc.rows) break;  // uniform in the subgroup

    float acc[kMats * kRows * kTokens];
    for (uint i = 0; i < kMats * kRows * kTokens; ++i) acc[i] = 0.0;

    for (uint j0 = lane; j0 < n_vecs; j0 += VEC_UNROLL * lanes) {
      if (slot != gl_SubgroupID || j0 != lane) load_step(row0, j0, wv, sv);
      for (uint u = 0; u < VEC_UNROLL; ++u) {
        const uint j = j0 + u * lanes;
        const float keep = j < n_vecs ? 1.0 : 0.0;
        const uint jc = min(j, n_vecs - 1);
        for (uint t = 0; t < kTokens; ++t) {
          // The activations of vector jc: VEC_QUADS packed quads, their block scales, and (Q4_0)
          // the magic bits less 8 · the quad's sum, which takes GGML's q + 8 storage back to q.
          const uint xt = min(t0 + t, pc.n_tokens - 1);
#if defined(W_Q8_0)
          uvec4 xw;
          vec4 dx;
          load_x_vec(xt, jc, xw, dx);
#else
          uvec4 xw0, xw1;
          vec4 dx0, dx1;
          load_x_vec(xt, jc, xw0, xw1, dx0, dx1);
          int base[8];
          for (uint q = 0; q < 4; ++q) {
            base[q] = kMagicBits + sdot(pick4(xw0, q), 0xf8f8f8f8u, 0);
            base[4 + q] = kMagicBits + sdot(pick4(xw1, q), 0xf8f8f8f8u, 0);
          }
#endif
          for (uint m = 0; m < kMats; ++m) {
            for (uint r = 0; r < kRows; ++r) {
              const uint i = (m * VEC_UNROLL + u) * kRows + r;
              float s = 0.0;
#if defined(W_Q8_0)
              for (uint q = 0; q < 4; ++q) {
                const float dot = intBitsToFloat(kMagicBits + sdot(pick4(wv[i], q), pick4(xw, q), 0)) - kMagicF;
                s += dot * (quad_scale(sv[i], jc, q) * dx[q]);
              }
#else
              for (uint k = 0; k < 4; ++k) {  // word k: quads 2k (low nibbles), 2k + 1 (high)
                const uint w = pick4(wv[i], k);
                const vec2 dw = unpackHalf2x16(pick4(sv[i], k));
                const uvec4 xk = k < 2 ? xw0 : xw1;
                const vec4 dk = k < 2 ? dx0 : dx1;
                const float lo = intBitsToFloat(base[2 * k] + sdot(w & 0x0f0f0f0fu, pick4(xk, (2 * k) % 4), 0)) - kMagicF;
                const float hi = intBitsToFloat(base[2 * k + 1] + sdot((w >> 4) & 0x0f0f0f0fu, pick4(xk, (2 * k + 1) % 4), 0)) - kMagicF;
                s += lo * (dw.x * dk[(2 * k) % 4]) + hi * (dw.y * dk[(2 * k + 1) % 4]);
              }
#endif
              acc[(m * kRows + r) * kTokens + t] += keep * s;
            }
          }
        }
      }
    }

    for (uint i = 0; i < kMats * kRows * kTokens; ++i) acc[i] = subgroupAdd(acc[i]);
    if (lane == 0) {
      for (uint r = 0; r < kRows; ++r) {
        for (uint t = 0; t < kTokens; ++t) {
          if (row0 + r >= pc.rows || t0 + t >= pc.n_tokens) continue;
#ifdef GATE_UP
          const float g = acc[r * kTokens + t], u = acc[(kRows + r) * kTokens + t];
          y[(t0 + t) * pc.y_stride + row0 + r] = gelu_tanh(g) * u;
#else
          y[(t0 + t) * pc.y_stride + row0 + r] = acc[r * kTokens + t];
#endif
        }
      }
    }
  }
}
