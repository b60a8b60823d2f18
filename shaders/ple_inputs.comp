// The PLE inputs of a chunk (GEMMA4_TEXT.md §4.3.2-4), one workgroup per row r = t·L + l:
//   ple[r, j] = (rmsnorm(proj[r, :] · proj_scale) · norm_w[j] + rows[r, j] · ple_scale) · 2^(-1/2)
//   proj: binding 0, [T·L, P] f32 (per_layer_model_projection · x)   norm_w: binding 1, [P] f32
//   rows: binding 2, [T·L, P] f32 (the table rows of the chunk's ids, gathered by the host)
//   ple: binding 3, [T·L, P] f32; may be the same memory as proj (each invocation reads its
//   elements before it writes them, and no invocation touches another's)
//   push: PleInputsPush (embed.h). spec: LOCAL_SIZE invocations, MAX_SUBGROUPS.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#define INFER_PLE_INPUTS
#include "embed.h"

layout(local_size_x_id = INFER_EMBED_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_EMBED_SPEC_MAX_SUBGROUPS) const uint kMaxSubgroups = 32;

layout(binding = 0, std430) readonly buffer Proj { float proj[]; };
layout(binding = 1, std430) readonly buffer NormW { float norm_w[]; };
layout(binding = 2, std430) readonly buffer Rows { float rows[]; };
layout(binding = 3, std430) writeonly buffer Ple { float ple[]; };

shared float red_partial[kMaxSubgroups * 2];
#include "common/reduce.glsl"
#include "norm_row.glsl"

const float kCombine = 0.70710678118654752;  // 2^(-1/2)

void main() {
  const uint r = row_index();
  if (r >= pc.rows) return;  // whole workgroup: the grid is rounded up in y
  const uint base = r * pc.P;
  // The projection is scaled, rounded to f32, then normalised, as model/forward_embed.cpp does.
  const uint step = gl_WorkGroupSize.x;
  float sum_sq = 0.0;
  for (uint j0 = gl_LocalInvocationID.x; j0 < pc.P; j0 += step * kBatch) {
    float v[kBatch];
    for (uint b = 0, j = j0; b < kBatch; ++b, j += step) {
      v[b] = j < pc.P ? proj[base + j] * pc.proj_scale : 0.0;
    }
    for (uint b = 0; b < kBatch; ++b) sum_sq += v[b] * v[b];
  }
  const float inv = inv_rms(workgroup_sum(sum_sq), pc.P, pc.eps);
  for (uint j0 = gl_LocalInvocationID.x; j0 < pc.P; j0 += step * kBatch) {
    float v[kBatch], wv[kBatch], rv[kBatch];
    for (uint b = 0, j = j0; b < kBatch; ++b, j += step) {
      v[b] = j < pc.P ? proj[base + j] * pc.proj_scale : 0.0;
      wv[b] = j < pc.P ? norm_w[j] : 0.0;
      rv[b] = j < pc.P ? rows[base + j] : 0.0;
    }
    for (uint b = 0, j = j0; b < kBatch; ++b, j += step) {
      if (j < pc.P) ple[base + j] = (v[b] * inv * wv[b] + rv[b] * pc.ple_scale) * kCombine;
    }
  }
}
