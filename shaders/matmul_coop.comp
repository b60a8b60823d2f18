// Prefill's matrix-matrix product on cooperative matrices (common/matmul_coop.glsl) with f32
// activations, for bf16 weights and for Q8_0/Q4_0 ones while integer dots are off.
// f16's range bounds activations to |x| < 65504.
//
// Precision: f16 keeps 11 bits, too few for the forward pass's 2e-3 bound on logits. Each
// activation goes in as hi + lo (split once a product by coop_x_prep.comp: every row tile reads
// all of x, and splitting in each cost more than its products): hi its f32 bits cut to 11
// significant ones (exact in f16: a bit mask, which no compiler folds away as it may an f32 ->
// f16 -> f32 round trip; the H200's driver did, and every lo part was 0 at first), lo =
// x - hi (exact in f32) as f16: ~22 bits. spec LO_PRODUCTS, how the lo parts are multiplied:
// 1, into the hi accumulators (they sit ~2^-11 below the hi products; the f32 accumulation keeps
// ~13 of their bits; where |lo| < 2^-14 they are f16 subnormals, 2^-24 apart); 2, scaled by
// 2^11 into accumulators of their own (more registers); 0, not at all (f16 activations alone).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

// Per quad a uvec4 of f16 hi and lo pairs.
#define X_BUFFERS layout(binding = 1, std430) readonly buffer XP { uvec4 x_pairs[]; };
// The tiles: x's hi parts, then its lo parts (LO_PRODUCTS 2: scaled by 2^11), then W.
#define X_TILE_LAYOUT                     \
  const uint kLoUsed = kLoProducts;       \
  const uint kXLoOff = kXOff + kXHalves;  \
  const uint kWOff = kXLoOff + kXHalves;  \
  const uint kXdFloats = 0;
#define X_REGISTERS uvec4 x_raw[kXPer];
#define X_LOAD(k, q, live, col) x_raw[k] = live ? x_pairs[q] : uvec4(0); /* f16 zeros */
// The pairs as coop_x_prep.comp prepared them (hi, then lo), stored as they come.
#define X_STORE(k, i, o)                  \
  sh_t[(kXOff + o) / 4] = x_raw[k].xy;    \
  sh_t[(kXLoOff + o) / 4] = x_raw[k].zw;
#define BLOCK_XD(t)
#define BLOCK_SCALE(s, e) s[e]
#include "common/matmul_coop.glsl"
