// RMSNorm over rows (GEMMA4_TEXT.md §4.1), f32, one workgroup per row:
//   x: binding 0, [rows, n] f32       w: binding 1, [n] f32 (absent with NO_WEIGHT)
//   out: the last binding, [rows, n] f32; may be the same memory as x (each invocation reads its
//   elements before it writes them, and no invocation touches another's)
//   push: NormPush (rms_norm.h). spec: LOCAL_SIZE invocations, MAX_SUBGROUPS >= gl_NumSubgroups.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#include "rms_norm.h"

layout(local_size_x_id = INFER_NORM_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_NORM_SPEC_MAX_SUBGROUPS) const uint kMaxSubgroups = 32;

layout(binding = 0, std430) readonly buffer X { float x[]; };
#if defined(NO_WEIGHT)
layout(binding = 1, std430) writeonly buffer Out { float out_[]; };
#else
layout(binding = 1, std430) readonly buffer W { float w[]; };
layout(binding = 2, std430) writeonly buffer Out { float out_[]; };
#endif

shared float red_partial[kMaxSubgroups * 2];
#include "common/reduce.glsl"
#include "norm_row.glsl"

void main() {
  const uint row = row_index();
  if (row >= pc.rows) return;  // whole workgroup: the grid is rounded up in y
  const uint base = row * pc.n;
  const uint step = gl_WorkGroupSize.x;
  float sum_sq = 0.0;
  for (uint i0 = gl_LocalInvocationID.x; i0 < pc.n; i0 += step * kBatch) {
    float v[kBatch];
    for (uint b = 0, i = i0; b < kBatch; ++b, i += step) v[b] = i < pc.n ? x[base + i] : 0.0;
    for (uint b = 0; b < kBatch; ++b) sum_sq += v[b] * v[b];
  }
  const float inv = inv_rms(workgroup_sum(sum_sq), pc.n, pc.eps);
  for (uint i0 = gl_LocalInvocationID.x; i0 < pc.n; i0 += step * kBatch) {
    float v[kBatch], wv[kBatch];
    for (uint b = 0, i = i0; b < kBatch; ++b, i += step) {
      v[b] = i < pc.n ? x[base + i] : 0.0;
#if defined(NO_WEIGHT)
      wv[b] = 1.0;
#else
      wv[b] = i < pc.n ? w[i] : 0.0;
#endif
    }
    for (uint b = 0, i = i0; b < kBatch; ++b, i += step) {
#if defined(NO_WEIGHT)
      if (i < pc.n) out_[base + i] = v[b] * inv;
#else
      if (i < pc.n) out_[base + i] = v[b] * inv * wv[b];
#endif
    }
  }
}
