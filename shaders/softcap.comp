// Logit soft-cap (GEMMA4_TEXT.md §4.10), in place: y[i] = tanh(y[i] / cap) · cap, i < count.
//   y: binding 0, [count] f32
//   push: SoftcapPush (elementwise.h). spec: LOCAL_SIZE. Workgroups past the device's x limit
//   wrap into y (T·V = 67M logits on a 256-token chunk).
#version 450
#extension GL_GOOGLE_include_directive : require

#define INFER_SOFTCAP
#include "elementwise.h"
#include "tanh.glsl"

layout(local_size_x_id = INFER_ELEMENTWISE_SPEC_LOCAL_SIZE) in;

layout(binding = 0, std430) buffer Y { float y[]; };

void main() {
  const uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  const uint i = g * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  if (i >= pc.count) return;
  y[i] = tanh_f32(y[i] / pc.cap) * pc.cap;
}
