// MoE router logits (GEMMA4_TEXT.md §4.9), f32:
//   logits[t, e] = router[e] · (rmsnorm(x[t]) ⊙ scale) · H^(-1/2)
// computed as (router[e] · (x[t] ⊙ scale)) · inv_rms(x[t]) · H^(-1/2), the per-token norm
// factored out of the sum so no normalised copy of x is stored.
//   router: binding 0, [E, H] F32 or BF16 in the device layout (common/weights.glsl; rows = E,
//   cols = H)
//   x: binding 1, [T, H] f32   scale: binding 2, [H] f32   logits: binding 3, [T, E] f32
//   push: MoePush (moe.h). spec: LOCAL_SIZE, ROWS experts per workgroup, MAX_SUBGROUPS.
//   Workgroup (x, y) owns experts [ROWS * x, ROWS * (x + 1)) of token y; each workgroup also sums
//   x[t]² itself (H floats it reads anyway).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#include "moe.h"

layout(local_size_x_id = INFER_MOE_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_MOE_SPEC_ROWS) const uint kRows = 1;
layout(constant_id = INFER_MOE_SPEC_MAX_SUBGROUPS) const uint kMaxSubgroups = 32;

layout(binding = 1, std430) readonly buffer X { float x[]; };
layout(binding = 2, std430) readonly buffer Scale { float scale[]; };
layout(binding = 3, std430) writeonly buffer Logits { float logits[]; };

#include "common/weights.glsl"

shared float red_partial[kMaxSubgroups * (kRows + 1)];
#include "common/reduce.glsl"

void main() {
  const uint row0 = gl_WorkGroupID.x * kRows;
  const uint t = gl_WorkGroupID.y;
  if (row0 >= pc.rows) return;
  const uint n_rows = min(kRows, pc.rows - row0);
  const uint n_sums = kRows + 1;  // kRows dot products, then Σ x²

  float acc[kRows + 1];
  for (uint i = 0; i < n_sums; ++i) acc[i] = 0.0;
  const uint xb = t * pc.cols;
  for (uint c = gl_LocalInvocationID.x; c < pc.cols; c += gl_WorkGroupSize.x) {
    const float v = x[xb + c];
    const float xs = v * scale[c];
    acc[kRows] += v * v;
    for (uint r = 0; r < n_rows; ++r) acc[r] += weight_at(row0 + r, c) * xs;
  }

  for (uint i = 0; i < n_sums; ++i) red_add(acc[i], i, n_sums);
  barrier();
  const float inv_rms = 1.0 / sqrt(red_total(kRows, n_sums) / float(pc.cols) + pc.eps);
  for (uint r = gl_LocalInvocationID.x; r < n_rows; r += gl_WorkGroupSize.x) {
    logits[t * pc.E + row0 + r] = red_total(r, n_sums) * inv_rms * pc.inv_sqrt_h;
  }
}
