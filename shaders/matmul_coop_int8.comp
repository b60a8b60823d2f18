// Prefill's matrix-matrix product on cooperative matrices (common/matmul_coop.glsl) with the
// activations quantized to GGML Q8_0 blocks of 32 (by coop_x_prep.comp's INT8 form, bit for bit
// as the CPU's quantize_row_q8_0), for Q8_0/Q4_0 weights while integer dots are on: the contract
// of matmul_reference_q8_x (and of matvec_dot.comp, which takes the same products at small T).
// The integers are exact in f16 and a block's 32 products sum exactly in f32 (< 2^24), so one
// f16 product a fragment replaces the hi + lo pair (LO_PRODUCTS is ignored), and each block's
// sum meets both scales in f32: the weights' (down each column) and the activations' (along each
// row).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

// Per quad an int8 word, then the blocks' scales.
#define X_BUFFERS                                                      \
  layout(binding = 1, std430) readonly buffer XQ { uint xq_words[]; }; \
  layout(binding = 1, std430) readonly buffer XD { float xq_scales[]; };
// The tiles: x's integers (no lo parts: kXLoOff only lets the dead lo branch compile), then W;
// the floats: [block of the step][token], the activations' scales.
#define X_TILE_LAYOUT                     \
  const uint kLoUsed = 0;                 \
  const uint kXLoOff = kXOff;             \
  const uint kWOff = kXOff + kXHalves;    \
  const uint kXdFloats = kBlocks * kTokens;
// xd_raw: the block's scale, where the quad is its first.
#define X_REGISTERS   \
  uint x_raw[kXPer];  \
  float xd_raw[kXPer];
#define X_LOAD(k, q, live, col)         \
  x_raw[k] = live ? xq_words[q] : 0u;   \
  xd_raw[k] = live && col % 32 == 0 ? xq_scales[pc.n_tokens * (pc.cols / 4) + q / 8] : 0.0;
// int8 -> f16 by the exponent trick (quad_q16_from_raw's): byte b + 128 under 1024's exponent.
#define X_STORE(k, i, o)                                                               \
  const uint w = x_raw[k] ^ 0x80808080u;                                               \
  const uint lo = (w & 0xffu) | ((w & 0xff00u) << 8);                                  \
  const uint hi = ((w >> 16) & 0xffu) | (w & 0xff000000u) >> 8;                        \
  const f16vec2 bias = f16vec2(float16_t(1152.0));                                     \
  tile_store(kXOff + o, f16vec4(unpackFloat2x16(lo | 0x64006400u) - bias,              \
                                unpackFloat2x16(hi | 0x64006400u) - bias));            \
  if (i % 8 == 0) sh_f[kXdOff + (i % kQuads) / 8 * kTokens + i / kQuads] = xd_raw[k];
#define BLOCK_XD(t) FRAG_ACC xs; coopMatLoadNV(xs, sh_f, kXdOff + b * kTokens + (t), 0, true);
#define BLOCK_SCALE(s, e) (s[e] * xs[e])
#include "common/matmul_coop.glsl"
#ifndef W_SCALED
#error "matmul_coop_int8.comp takes Q8_0 or Q4_0 weights"
#endif
