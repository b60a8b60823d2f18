// Reads a range of a buffer and drops it: a product's weights brought into the device's L2 cache
// by a dispatch beside the latency-bound step before the product (decode attention, add_norm),
// which leaves most of the GPU's memory bandwidth idle, so that the product after it finds them
// there (gpu/ops/elementwise.h, ElementwiseOps::prefetch).
//   src: binding 0, uvec4 [..]: reads src[first .. first + n)
//   sink: binding 1, written only when write_sink != 0, which the host never sets: it is there so
//         that the compiler cannot drop the loads, and the recorder treats it as read.
//   push: PrefetchPush (elementwise.h). spec 0: LOCAL_SIZE.
// Grid-stride, four 16-byte loads in flight an invocation (read_bandwidth.comp's loop).
#version 450
#extension GL_GOOGLE_include_directive : require

#define INFER_PREFETCH
#include "elementwise.h"

layout(local_size_x_id = INFER_ELEMENTWISE_SPEC_LOCAL_SIZE) in;

layout(binding = 0, std430) readonly buffer Src { uvec4 src[]; };
layout(binding = 1, std430) writeonly buffer Sink { uint sink[]; };

void main() {
  const uint grid = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  uint i = gl_GlobalInvocationID.x;
  uvec4 a = uvec4(0), b = uvec4(0), c = uvec4(0), e = uvec4(0);
  for (; i + 3 * grid < pc.n; i += 4 * grid) {
    a ^= src[pc.first + i];
    b ^= src[pc.first + i + grid];
    c ^= src[pc.first + i + 2 * grid];
    e ^= src[pc.first + i + 3 * grid];
  }
  for (; i < pc.n; i += grid) a ^= src[pc.first + i];
  const uvec4 v = a ^ b ^ c ^ e;
  if (pc.write_sink != 0u) sink[0] = v.x ^ v.y ^ v.z ^ v.w;
}
