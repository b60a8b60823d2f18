// add_norm.comp's step for rows longer than its registers form takes (n > LOCAL_SIZE ·
// PER_INVOCATION): the row looped over in batches instead of held in registers (add_norm_row.glsl),
// one workgroup per token t:
//   x[t] = (x[t] + rmsnorm(o[t]) · w_post) · scale
// and with FUSE_NEXT h[t] = rmsnorm(x[t]) · next_w.
//   x: binding 0, [T, n] f32 (read and written)   o: binding 1, [T, n] f32
//   w_post: binding 2, [n] f32
//   FUSE_NEXT: next_w binding 3, [n] f32; h binding 4, [T, n] f32
//   push: NormPush (rms_norm.h), rows = T. spec: LOCAL_SIZE invocations, MAX_SUBGROUPS.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#include "rms_norm.h"

layout(local_size_x_id = INFER_NORM_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_NORM_SPEC_MAX_SUBGROUPS) const uint kMaxSubgroups = 32;

layout(binding = 0, std430) buffer X { float stream[]; };
layout(binding = 1, std430) readonly buffer O { float o[]; };
layout(binding = 2, std430) readonly buffer WPost { float w_post[]; };
#if defined(FUSE_NEXT)
layout(binding = 3, std430) readonly buffer WNext { float next_w[]; };
layout(binding = 4, std430) writeonly buffer Hout { float h[]; };
#endif

shared float red_partial[kMaxSubgroups * 2];
#include "common/reduce.glsl"
#include "norm_row.glsl"
#include "add_norm_row.glsl"

void main() {
  const uint t = row_index();
  if (t >= pc.rows) return;  // whole workgroup: the grid is rounded up in y
  add_norm_row(t * pc.n, pc.n);
}
