// MoE expert front half (GEMMA4_TEXT.md §4.9), f32 accumulation: for pair p = t·k + j routed to
// expert e = idx[p], act[p, i] = gelu(gate_e[i] · x2[t]) · (up_e[i] · x2[t]).
//   W: binding 0, E stacked [2I, H] matrices (rows [0, I) gate, [I, 2I) up) in the device
//      layout of W_* (common/weights.glsl; rows = I, cols = H)
//   x2: binding 1, [T, H] f32   act: binding 2, [T·k, I] f32   idx: binding 3, [T·k] uint
//   push: MoePush (moe.h). spec: LOCAL_SIZE, ROWS rows of I per workgroup, MAX_SUBGROUPS.
//   Workgroup (x, y) owns rows [ROWS * x, ROWS * (x + 1)) of pair y. The expert id is read here,
//   on the GPU, so routing needs no readback.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#include "moe.h"

layout(local_size_x_id = INFER_MOE_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_MOE_SPEC_ROWS) const uint kRows = 1;
layout(constant_id = INFER_MOE_SPEC_MAX_SUBGROUPS) const uint kMaxSubgroups = 32;

layout(binding = 1, std430) readonly buffer X { float x[]; };
layout(binding = 2, std430) writeonly buffer Act { float act[]; };
layout(binding = 3, std430) readonly buffer Idx { uint idx[]; };

#include "common/gelu.glsl"
#include "common/weights.glsl"

// x[b + c .. c + 3]; a quad past cols (zero weights) reads the last one instead.
vec4 load_x_quad(uint b, uint c) {
  const uint last = pc.cols - 1;
  return vec4(x[b + min(c, last)], x[b + min(c + 1, last)], x[b + min(c + 2, last)],
              x[b + min(c + 3, last)]);
}

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
  const uint n_vecs = w_vecs();
  for (uint j = gl_LocalInvocationID.x; j < n_vecs; j += gl_WorkGroupSize.x) {
    vec4 xq[VEC_QUADS];
    for (uint q = 0; q < VEC_QUADS; ++q) xq[q] = load_x_quad(xb, vec_quad_col(j, q));
    for (uint r = 0; r < n_rows; ++r) {
      acc[r] += vec_dot(load_vec_of(0u, gate0 + r, j), load_scales_of(0u, gate0 + r, j), j, xq);
      acc[kRows + r] += vec_dot(load_vec_of(0u, up0 + r, j), load_scales_of(0u, up0 + r, j), j, xq);
    }
  }

  for (uint i = 0; i < 2 * kRows; ++i) red_add(acc[i], i, 2 * kRows);
  barrier();
  for (uint r = gl_LocalInvocationID.x; r < n_rows; r += gl_WorkGroupSize.x) {
    const float g = red_total(r, 2 * kRows), v = red_total(kRows + r, 2 * kRows);
    act[pair * pc.rows + row0 + r] = gelu_tanh(g) * v;
  }
}
