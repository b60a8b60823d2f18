// Prepares the activations of a cooperative-matrix product (shaders/matmul_coop.comp) once, so
// that its workgroups (every row tile reads all of x) only copy them into shared memory:
//   x: binding 0, [n_tokens, x_stride] f32        out: binding 1, the prepared x (below)
//   push: MatvecPush (matvec.h; rows and split unused). spec: LOCAL_SIZE, LO_PRODUCTS (f16
//   pairs only).
// One invocation a block of 32 columns of one token; cols is a multiple of 64 (coop_path).
//   default: each quad of 4 activations as one uvec4, [n_tokens][cols / 4]: x hi parts as two f16
//            pairs, then lo parts (matmul_coop.comp's header says how hi and lo split; LO_PRODUCTS
//            2 scales lo by 2^11)
//   INT8:    Q8_0 blocks bit for bit as the CPU's quantize_row_q8_0 (common/quant_x.glsl): the
//            int8 quants as words, [n_tokens][cols / 4], then the f16-rounded scales as f32,
//            [n_tokens][cols / 32]
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

#include "matvec.h"

layout(local_size_x_id = INFER_COOP_PREP_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_MATMUL_COOP_SPEC_LO_PRODUCTS) const uint kLoProducts = 1;

layout(binding = 0, std430) readonly buffer X { vec4 x4[]; };
#ifdef INT8
#include "common/quant_x.glsl"
layout(binding = 1, std430) writeonly buffer Q { uint q_words[]; };
layout(binding = 1, std430) writeonly buffer D { float q_scales[]; };
#else
layout(binding = 1, std430) writeonly buffer P { uvec4 pairs[]; };
#endif

void main() {
  const uint blocks = pc.cols / 32;
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x *
                                               gl_WorkGroupSize.x;
  if (i >= pc.n_tokens * blocks) return;
  const uint t = i / blocks, b = i % blocks;
  const uint src = (t * pc.x_stride + 32 * b) / 4;  // x_stride % 4 == 0 (the host checks)
  const uint dst = t * (pc.cols / 4) + 8 * b;       // the block's first quad
#ifdef INT8
  vec4 v[8];
  for (uint k = 0; k < 8; ++k) v[k] = x4[src + k];
  uint words[8];
  const float d = quantize_block(v, words);
  for (uint k = 0; k < 8; ++k) q_words[dst + k] = words[k];
  q_scales[pc.n_tokens * (pc.cols / 4) + i] = d;
#else
  for (uint k = 0; k < 8; ++k) {
    const vec4 v = x4[src + k];
    // hi: x's bits cut to 11 significant ones (exact in f16; a mask, not a round trip a compiler
    // may fold), lo = x - hi (exact in f32) as f16.
    const vec4 hi32 = uintBitsToFloat(floatBitsToUint(v) & 0xffffe000u);
    const f16vec4 hi = f16vec4(hi32);
    const float lo_scale = kLoProducts == 2u ? INFER_MATMUL_COOP_LO_SCALE : 1.0;
    const f16vec4 lo = f16vec4((v - hi32) * lo_scale);
    pairs[dst + k] = uvec4(packFloat2x16(hi.xy), packFloat2x16(hi.zw), packFloat2x16(lo.xy),
                           packFloat2x16(lo.zw));
  }
#endif
}
