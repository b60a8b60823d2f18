// Gated GELU with strided operands (the PLE block reads slice l of ple [T, L·P]):
//   out[t·n + j] = gelu_tanh(a[t·a_stride + a_off + j]) · b[t·b_stride + b_off + j]
//   a: binding 0 f32   b: binding 1 f32   out: binding 2, [T, n] f32; may be the same memory as
//   a when a_stride = n and a_off = 0 (then each invocation reads only what it writes)
//   push: GeluMulPush (elementwise.h). spec: LOCAL_SIZE. Workgroup (x, y = t).
#version 450
#extension GL_GOOGLE_include_directive : require

#define INFER_GELU_MUL
#include "elementwise.h"
#include "common/gelu.glsl"

layout(local_size_x_id = INFER_ELEMENTWISE_SPEC_LOCAL_SIZE) in;

layout(binding = 0, std430) readonly buffer A { float a[]; };
layout(binding = 1, std430) readonly buffer B { float b[]; };
layout(binding = 2, std430) writeonly buffer Out { float out_[]; };

void main() {
  const uint t = gl_WorkGroupID.y;
  const uint j = gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  if (t >= pc.n_tokens || j >= pc.n) return;
  out_[t * pc.n + j] =
      gelu_tanh(a[t * pc.a_stride + pc.a_off + j]) * b[t * pc.b_stride + pc.b_off + j];
}
