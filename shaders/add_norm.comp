// The residual step that ends a block (GEMMA4_TEXT.md §4.4), one workgroup per token t:
//   x[t] = (x[t] + rmsnorm(o[t]) · w_post) · scale
// and with FUSE_NEXT h[t] = rmsnorm(x[t]) · next_w, the next block's input norm, while x[t] is
// still in the cache.
//   x: binding 0, [T, n] f32 (read and written)   o: binding 1, [T, n] f32
//   w_post: binding 2, [n] f32
//   FUSE_NEXT: next_w binding 3, [n] f32; h binding 4, [T, n] f32
//   push: NormPush (norm.h), rows = T. spec: LOCAL_SIZE invocations, MAX_SUBGROUPS.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#include "norm.h"

layout(local_size_x_id = INFER_NORM_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_NORM_SPEC_MAX_SUBGROUPS) const uint kMaxSubgroups = 32;

layout(binding = 0, std430) buffer X { float x[]; };
layout(binding = 1, std430) readonly buffer O { float o[]; };
layout(binding = 2, std430) readonly buffer WPost { float w_post[]; };
#if defined(FUSE_NEXT)
layout(binding = 3, std430) readonly buffer WNext { float next_w[]; };
layout(binding = 4, std430) writeonly buffer Hout { float h[]; };
#endif

shared float red_partial[kMaxSubgroups * 2];
#include "common/reduce.glsl"
#include "norm_row.glsl"

void main() {
  const uint t = row_index();
  if (t >= pc.rows) return;  // whole workgroup: the grid is rounded up in y
  const uint base = t * pc.n;
  const uint step = gl_WorkGroupSize.x;
  float sum_sq = 0.0;
  for (uint i0 = gl_LocalInvocationID.x; i0 < pc.n; i0 += step * kBatch) {
    float v[kBatch];
    for (uint b = 0, i = i0; b < kBatch; ++b, i += step) v[b] = i < pc.n ? o[base + i] : 0.0;
    for (uint b = 0; b < kBatch; ++b) sum_sq += v[b] * v[b];
  }
  const float inv = inv_rms(workgroup_sum(sum_sq), pc.n, pc.eps);

  // Each invocation rereads only the x elements it wrote itself, so no barrier is needed.
  float next_sum_sq = 0.0;
  for (uint i0 = gl_LocalInvocationID.x; i0 < pc.n; i0 += step * kBatch) {
    float xv[kBatch], ov[kBatch], wv[kBatch];
    for (uint b = 0, i = i0; b < kBatch; ++b, i += step) {
      xv[b] = i < pc.n ? x[base + i] : 0.0;
      ov[b] = i < pc.n ? o[base + i] : 0.0;
      wv[b] = i < pc.n ? w_post[i] : 0.0;
    }
    for (uint b = 0, i = i0; b < kBatch; ++b, i += step) {
      const float v = (xv[b] + ov[b] * inv * wv[b]) * pc.scale;
      if (i < pc.n) x[base + i] = v;
      next_sum_sq += v * v;  // 0 past the row
    }
  }
#if defined(FUSE_NEXT)
  const float next_inv = inv_rms(workgroup_sum(next_sum_sq), pc.n, pc.eps);
  for (uint i0 = gl_LocalInvocationID.x; i0 < pc.n; i0 += step * kBatch) {
    float xv[kBatch], wv[kBatch];
    for (uint b = 0, i = i0; b < kBatch; ++b, i += step) {
      xv[b] = i < pc.n ? x[base + i] : 0.0;
      wv[b] = i < pc.n ? next_w[i] : 0.0;
    }
    for (uint b = 0, i = i0; b < kBatch; ++b, i += step) {
      if (i < pc.n) h[base + i] = xv[b] * next_inv * wv[b];
    }
  }
#endif
}
