// TEMPORARY A/B (session 12, INFER_COOP_AB=ab4/ab5): decodes a Q8_0/Q4_0 matrix once a product
// into the plain layout matmul_coop.comp's W_PREDEC staging copies as is:
//   W: binding 0, [rows, cols] in the device layout (common/weights.glsl)
//   out: binding 1, each quad's integers as f16 (uvec2), [rows][cols / 4], then the blocks'
//        scales as f32, [rows][cols / 32]
//   push: MatvecPush (rows, cols). One invocation a block of 32 columns.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

#include "matvec.h"

layout(local_size_x_id = INFER_COOP_PREP_SPEC_LOCAL_SIZE) in;

#define WEIGHTS_F16_QUADS
#include "common/weights.glsl"

layout(binding = 1, std430) writeonly buffer Q { uvec2 out_q[]; };
layout(binding = 1, std430) writeonly buffer D { float out_d[]; };

void main() {
  const uint blocks = pc.cols / 32;
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x *
                                               gl_WorkGroupSize.x;
  if (i >= pc.rows * blocks) return;
  const uint row = i / blocks, b = i % blocks;
  for (uint k = 0; k < 8; ++k) {
    const uint c = 32 * b + 4 * k;
    const f16vec4 q = quad_q16_from_raw(quad_raw_of(0u, row, c), c);
    out_q[row * (pc.cols / 4) + c / 4] = uvec2(packFloat2x16(q.xy), packFloat2x16(q.zw));
  }
  out_d[pc.rows * (pc.cols / 2) + i] = quad_d_from_raw(quad_raw_of(0u, row, 32 * b), 32 * b);
}
