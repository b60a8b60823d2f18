// MoE's two branches (GEMMA4_TEXT.md §4.4), one workgroup per token t:
//   out[t] = rmsnorm(a[t]) · wa + rmsnorm(b[t]) · wb
//   a: binding 0, [T, n] f32   wa: binding 1, [n]   b: binding 2, [T, n]   wb: binding 3, [n]
//   out: binding 4, [T, n] f32; may be the same memory as a (each invocation reads its elements
//   before it writes them, and no invocation touches another's)
//   push: NormPush (rms_norm.h), rows = T. spec: LOCAL_SIZE invocations, MAX_SUBGROUPS.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#include "rms_norm.h"

layout(local_size_x_id = INFER_NORM_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_NORM_SPEC_MAX_SUBGROUPS) const uint kMaxSubgroups = 32;

layout(binding = 0, std430) readonly buffer A { float a[]; };
layout(binding = 1, std430) readonly buffer WA { float wa[]; };
layout(binding = 2, std430) readonly buffer B { float b[]; };
layout(binding = 3, std430) readonly buffer WB { float wb[]; };
layout(binding = 4, std430) writeonly buffer Out { float out_[]; };

shared float red_partial[kMaxSubgroups * 2];
#include "common/reduce.glsl"
#include "norm_row.glsl"

void main() {
  const uint t = row_index();
  if (t >= pc.rows) return;  // whole workgroup: the grid is rounded up in y
  const uint base = t * pc.n;
  const uint step = gl_WorkGroupSize.x;
  vec2 sum_sq = vec2(0.0);
  for (uint i0 = gl_LocalInvocationID.x; i0 < pc.n; i0 += step * kBatch) {
    vec2 v[kBatch];
    for (uint k = 0, i = i0; k < kBatch; ++k, i += step) {
      v[k] = i < pc.n ? vec2(a[base + i], b[base + i]) : vec2(0.0);
    }
    for (uint k = 0; k < kBatch; ++k) sum_sq += v[k] * v[k];
  }
  const vec2 s = workgroup_sum2(sum_sq);
  const float inv_a = inv_rms(s.x, pc.n, pc.eps), inv_b = inv_rms(s.y, pc.n, pc.eps);
  for (uint i0 = gl_LocalInvocationID.x; i0 < pc.n; i0 += step * kBatch) {
    float av[kBatch], bv[kBatch], wav[kBatch], wbv[kBatch];
    for (uint k = 0, i = i0; k < kBatch; ++k, i += step) {
      av[k] = i < pc.n ? a[base + i] : 0.0;
      bv[k] = i < pc.n ? b[base + i] : 0.0;
      wav[k] = i < pc.n ? wa[i] : 0.0;
      wbv[k] = i < pc.n ? wb[i] : 0.0;
    }
    for (uint k = 0, i = i0; k < kBatch; ++k, i += step) {
      if (i < pc.n) out_[base + i] = av[k] * inv_a * wav[k] + bv[k] * inv_b * wbv[k];
    }
  }
}
