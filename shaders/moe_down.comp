// MoE expert back half and combine (GEMMA4_TEXT.md §4.9), f32 accumulation:
//   out[t, r] = Σ_j w[t, j] · (down_e[r] · act[t·k + j]),  e = idx[t·k + j]
//   W: binding 0, E stacked [H, I] matrices in the device layout of W_* (common/weights.glsl;
//      rows = H, cols = I)
//   act: binding 1, [T·k, I] f32   out: binding 2, [T, H] f32   idx: binding 3, [T·k] uint
//   w: binding 4, [T·k] f32
//   push: MoePush (moe.h). spec: LOCAL_SIZE, ROWS rows of H per workgroup, MAX_SUBGROUPS.
//   Workgroup (x, y) owns rows [ROWS * x, ROWS * (x + 1)) of token y and sums its k experts
//   itself, so out is written once, without atomics or a [T·k, H] scratch.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#include "moe.h"

layout(local_size_x_id = INFER_MOE_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_MOE_SPEC_ROWS) const uint kRows = 1;
layout(constant_id = INFER_MOE_SPEC_MAX_SUBGROUPS) const uint kMaxSubgroups = 32;

layout(binding = 1, std430) readonly buffer Act { float act[]; };
layout(binding = 2, std430) writeonly buffer Out { float out_[]; };
layout(binding = 3, std430) readonly buffer Idx { uint idx[]; };
layout(binding = 4, std430) readonly buffer W { float route_w[]; };

#include "common/weights.glsl"

// act[b + c .. c + 3]; a quad past cols (zero weights) reads the last one instead.
vec4 load_act_quad(uint b, uint c) {
  const uint last = pc.cols - 1;
  return vec4(act[b + min(c, last)], act[b + min(c + 1, last)], act[b + min(c + 2, last)],
              act[b + min(c + 3, last)]);
}

shared float red_partial[kMaxSubgroups * kRows];
#include "common/reduce.glsl"

void main() {
  const uint row0 = gl_WorkGroupID.x * kRows;
  const uint t = gl_WorkGroupID.y;
  if (row0 >= pc.rows) return;
  const uint n_rows = min(kRows, pc.rows - row0);

  float acc[kRows];
  for (uint r = 0; r < kRows; ++r) acc[r] = 0.0;
  for (uint j = 0; j < pc.k; ++j) {
    const uint pair = t * pc.k + j;
    const uint e = min(idx[pair], pc.E - 1);  // a corrupt id must not read past the stack
    const float wt = route_w[pair];
    const uint ab = pair * pc.cols;
    for (uint v = gl_LocalInvocationID.x; v < w_vecs(); v += gl_WorkGroupSize.x) {
      vec4 aq[VEC_QUADS];
      for (uint q = 0; q < VEC_QUADS; ++q) aq[q] = load_act_quad(ab, vec_quad_col(v, q));
      for (uint r = 0; r < n_rows; ++r) {
        const uint row = e * pc.rows + row0 + r;
        acc[r] += wt * vec_dot(load_vec_of(0u, row, v), load_scales_of(0u, row, v), v, aq);
      }
    }
  }

  for (uint r = 0; r < kRows; ++r) red_add(acc[r], r, kRows);
  barrier();
  for (uint r = gl_LocalInvocationID.x; r < n_rows; r += gl_WorkGroupSize.x) {
    out_[t * pc.rows + row0 + r] = red_total(r, kRows);
  }
}
