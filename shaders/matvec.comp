// Matrix-vector (T = 1) and small-T matrix-matrix product, f32 activations and accumulation:
//   W: binding 0, [rows, cols] in the device layout of W_* (common/weights.glsl)
//   x: binding 1, [n_tokens, x_stride] f32        y: binding 2, [n_tokens, y_stride] f32
//   GATE_UP only: binding 3, the up matrix, like W (which is then the gate); y = gelu(g) · u
//   push: MatvecPush (matvec.h): its `split` subgroups share each row. spec: LOCAL_SIZE
//   invocations = SUBGROUPS subgroups of the device's size; ROWS rows per subgroup, TOKENS tokens
//   per workgroup, UNROLL vectors of each row a lane loads per round.
// The body (how rows and tokens are split over workgroups, subgroups and lanes) is
// matvec_rows.glsl.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#include "matvec.h"

layout(local_size_x_id = INFER_MATVEC_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_MATVEC_SPEC_ROWS) const uint kRows = 1;
layout(constant_id = INFER_MATVEC_SPEC_TOKENS) const uint kTokens = 1;
layout(constant_id = INFER_MATVEC_SPEC_SUBGROUPS) const uint kSubgroups = 1;

layout(binding = 1, std430) readonly buffer X { float x[]; };
layout(binding = 1, std430) readonly buffer X4 { vec4 x4[]; };
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
layout(constant_id = INFER_MATVEC_SPEC_UNROLL) const uint kUnroll = VEC_UNROLL;

// x[t, c .. c + 3]; a quad past cols (zero weights) reads the last one instead.
vec4 load_x_quad(uint t, uint c) {
  const uint xb = t * pc.x_stride;
  if ((pc.cols & 3u) == 0u && (pc.x_stride & 3u) == 0u) return x4[(xb + min(c, pc.cols - 4)) / 4];
  const uint last = pc.cols - 1;
  return vec4(x[xb + min(c, last)], x[xb + min(c + 1, last)], x[xb + min(c + 2, last)],
              x[xb + min(c + 3, last)]);
}

#define MATVEC_Y y
#define MATVEC_UNROLL kUnroll
#define MATVEC_SPLIT pc.split
#include "matvec_rows.glsl"

void main() { matvec_rows(); }
