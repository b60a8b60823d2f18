// Quantizes the activations of an integer-dot product once (shaders/matvec_dot.comp reads them),
// into GGML Q8_0 blocks bit for bit as the CPU's quantize_row_q8_0 (common/quant_x.glsl):
//   x: binding 0, [n_tokens, x_stride] f32        out: binding 1, the int8 quants as words,
//   [n_tokens][cols / 4], then the f16-rounded scales as f32, [n_tokens][cols / 32]
//   push: MatvecPush (matvec.h; rows and split unused). spec: LOCAL_SIZE.
// One invocation a block of 32 columns of one token; cols is a multiple of 32.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

#include "matvec.h"

layout(local_size_x_id = INFER_COOP_PREP_SPEC_LOCAL_SIZE) in;

layout(binding = 0, std430) readonly buffer X { vec4 x4[]; };
#include "common/quant_x.glsl"
layout(binding = 1, std430) writeonly buffer Q { uint q_words[]; };
layout(binding = 1, std430) writeonly buffer D { float q_scales[]; };

void main() {
  const uint blocks = pc.cols / 32;
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x *
                                               gl_WorkGroupSize.x;
  if (i >= pc.n_tokens * blocks) return;
  const uint t = i / blocks, b = i % blocks;
  const uint src = (t * pc.x_stride + 32 * b) / 4;  // x_stride % 4 == 0 (the host checks)
  const uint dst = t * (pc.cols / 4) + 8 * b;       // the block's first quad
  vec4 v[8];
  for (uint k = 0; k < 8; ++k) v[k] = x4[src + k];
  uint words[8];
  const float d = quantize_block(v, words);
  for (uint k = 0; k < 8; ++k) q_words[dst + k] = words[k];
  q_scales[pc.n_tokens * (pc.cols / 4) + i] = d;
}
