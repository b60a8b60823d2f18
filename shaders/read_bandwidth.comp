// Streaming read of a large buffer, the device's read bandwidth (gpu/gpu_bandwidth.cpp):
//   src: binding 0, uvec4 [n] (any contents)
//   out: binding 1, uint [gl_NumWorkGroups.x]: the XOR of everything the workgroup read, so
//        no read can be dropped
//   push: n (uvec4s in src). spec 0: LOCAL_SIZE.
// Invocation i of the grid reads uvec4 i, i + grid, i + 2·grid, .. (coalesced, grid-stride),
// four loads in flight per step.
#version 450
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;

layout(binding = 0, std430) readonly buffer Src { uvec4 src[]; };
layout(binding = 1, std430) writeonly buffer Out { uint out_words[]; };

layout(push_constant) uniform Push { uint n; } pc;

shared uint acc_sh;

void main() {
  const uint grid = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  uint i = gl_GlobalInvocationID.x;
  uvec4 a = uvec4(0), b = uvec4(0), c = uvec4(0), e = uvec4(0);
  for (; i + 3 * grid < pc.n; i += 4 * grid) {
    a ^= src[i];
    b ^= src[i + grid];
    c ^= src[i + 2 * grid];
    e ^= src[i + 3 * grid];
  }
  for (; i < pc.n; i += grid) a ^= src[i];
  const uvec4 v = a ^ b ^ c ^ e;
  const uint x = subgroupXor(v.x ^ v.y ^ v.z ^ v.w);
  if (gl_LocalInvocationID.x == 0) acc_sh = 0;
  barrier();
  if (subgroupElect()) atomicXor(acc_sh, x);
  barrier();
  if (gl_LocalInvocationID.x == 0) out_words[gl_WorkGroupID.x] = acc_sh;
}
