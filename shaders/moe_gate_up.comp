// MoE expert front half (GEMMA4_TEXT.md §4.9), f32 accumulation: for pair p = t·k + j routed to
// expert e = idx[p], act[p, i] = gelu(gate_e[i] · x2[t]) · (up_e[i] · x2[t]).
//   W: binding 0, E stacked [2I, H] matrices (rows [0, I) gate, [I, 2I) up) in the format of
//      W_* (common/weights.glsl; rows = I, cols = H)
//   x2: binding 1, [T, H] f32   act: binding 2, [T·k, I] f32   idx: binding 3, [T·k] uint
//   push: MoePush (moe.h). spec: LOCAL_SIZE, ROWS rows of I per workgroup, MAX_SUBGROUPS.
//   Workgroup (x, y) owns rows [ROWS * x, ROWS * (x + 1)) of pair y. The expert id is read here,
//   on the GPU, so routing needs no readback.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_shader_16bit_storage : require

#include "moe.h"

layout(local_size_x_id = INFER_MOE_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_MOE_SPEC_ROWS) const uint kRows = 1;
layout(constant_id = INFER_MOE_SPEC_MAX_SUBGROUPS) const uint kMaxSubgroups = 32;

layout(binding = 1, std430) readonly buffer X { float x[]; };
layout(binding = 2, std430) writeonly buffer Act { float act[]; };
layout(binding = 3, std430) readonly buffer Idx { uint idx[]; };

#include "common/gelu.glsl"
#include "common/weights.glsl"

shared float red_partial[kMaxSubgroups * 2 * kRows];
#include "common/reduce.glsl"

void main() {
  const uint row0 = gl_WorkGroupID.x * kRows;
  const uint pair = gl_WorkGroupID.y;
  if (row0 >= pc.rows) return;
  const uint n_rows = min(kRows, pc.rows - row0);
  const uint t = pair / pc.k;
  const uint e = min(idx[pair], pc.E - 1);  // a corrupt id must not read past the stack
  const uint gate0 = e * 2 * pc.rows + row0, up0 = gate0 + pc.rows;

  float acc[2 * kRows];  // gate sums, then up sums
  for (uint i = 0; i < 2 * kRows; ++i) acc[i] = 0.0;
  const uint xb = t * pc.cols;
  for (uint u = gl_LocalInvocationID.x; u < units_per_row(); u += gl_WorkGroupSize.x) {
    float xv[UNIT];
    for (uint k = 0; k < UNIT; ++k) xv[k] = x[xb + unit_col(u, k)];
    for (uint r = 0; r < n_rows; ++r) {
      float g[UNIT], v[UNIT];
      decode_unit(gate0 + r, u, g);
      decode_unit(up0 + r, u, v);
      for (uint k = 0; k < UNIT; ++k) {
        acc[r] += g[k] * xv[k];
        acc[kRows + r] += v[k] * xv[k];
      }
    }
  }

  for (uint i = 0; i < 2 * kRows; ++i) red_add(acc[i], i, 2 * kRows);
  barrier();
  for (uint r = gl_LocalInvocationID.x; r < n_rows; r += gl_WorkGroupSize.x) {
    const float g = red_total(r, 2 * kRows), v = red_total(kRows + r, 2 * kRows);
    act[pair * pc.rows + row0 + r] = gelu_tanh(g) * v;
  }
}
