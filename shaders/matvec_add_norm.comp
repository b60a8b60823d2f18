// A product that ends a block, fused with the block's residual step (decode: one dispatch and
// one barrier instead of two, or three with the PLE block's gelu_mul):
//   o = W · in (matvec_rows.glsl, as matvec.comp), in = x, or gelu(x) ⊙ b with gelu_b
//   then, by the last workgroup to finish, for each token t: add_norm_row.glsl (add_norm.comp's
//   step): stream[t] = (stream[t] + rmsnorm(o[t]) · w_post) · scale, FUSE_NEXT h[t] =
//   rmsnorm(stream[t]) · next_w.
//   W: binding 0, [rows, cols] in the device layout of W_* (common/weights.glsl)
//   x: binding 1, [n_tokens, x_stride] f32   o: binding 2, [n_tokens, y_stride] f32 (written)
//   b: binding 3 f32 (read with gelu_b)      stream: binding 4, [n_tokens, y_stride] f32
//   w_post: binding 5, [rows] f32            counter: binding 6, uint [1], 0 between dispatches
//   FUSE_NEXT: next_w binding 7, [rows] f32; h binding 8, [n_tokens, y_stride] f32
//   push: MatvecAddNormPush (matvec_add_norm.h). spec: as matvec.comp, and MAX_SUBGROUPS.
// The last workgroup is found with an atomic counter (acquire/release at device scope,
// GL_KHR_memory_scope_semantics, as attend_split.comp): each workgroup's o rows are released
// before it counts in, and the last one acquires every other's before reading o. It resets the
// counter for the next dispatch or replay (ordered after this one by the recorder's barrier on
// the counter buffer).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_memory_scope_semantics : require

#include "matvec_add_norm.h"

layout(local_size_x_id = INFER_MATVEC_ADD_NORM_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_MATVEC_ADD_NORM_SPEC_ROWS) const uint kRows = 1;
layout(constant_id = INFER_MATVEC_ADD_NORM_SPEC_TOKENS) const uint kTokens = 1;
layout(constant_id = INFER_MATVEC_ADD_NORM_SPEC_SUBGROUPS) const uint kSubgroups = 1;
layout(constant_id = INFER_MATVEC_ADD_NORM_SPEC_MAX_SUBGROUPS) const uint kMaxSubgroups = 32;

layout(binding = 1, std430) readonly buffer X { float x[]; };
layout(binding = 1, std430) readonly buffer X4 { vec4 x4[]; };
layout(binding = 2, std430) coherent buffer O { float o[]; };
layout(binding = 3, std430) readonly buffer B { float mul_b[]; };
layout(binding = 3, std430) readonly buffer B4 { vec4 mul_b4[]; };
layout(binding = 4, std430) buffer Stream { float stream[]; };
layout(binding = 5, std430) readonly buffer WPost { float w_post[]; };
layout(binding = 6, std430) coherent buffer Counter { uint counter[]; };
#if defined(FUSE_NEXT)
layout(binding = 7, std430) readonly buffer WNext { float next_w[]; };
layout(binding = 8, std430) writeonly buffer Hout { float h[]; };
#endif

const uint kMats = 1;
#include "common/gelu.glsl"
#include "common/weights.glsl"

// Columns c .. c + 3 of the row at `base` of x (of b), as matvec.comp loads x: a quad past cols
// (zero weights) reads the last one instead.
vec4 load_x4(uint base, uint c) {
  if ((pc.cols & 3u) == 0u && (base & 3u) == 0u) return x4[(base + min(c, pc.cols - 4)) / 4];
  const uint last = pc.cols - 1;
  return vec4(x[base + min(c, last)], x[base + min(c + 1, last)], x[base + min(c + 2, last)],
              x[base + min(c + 3, last)]);
}
vec4 load_b4(uint base, uint c) {
  if ((pc.cols & 3u) == 0u && (base & 3u) == 0u) {
    return mul_b4[(base + min(c, pc.cols - 4)) / 4];
  }
  const uint last = pc.cols - 1;
  return vec4(mul_b[base + min(c, last)], mul_b[base + min(c + 1, last)],
              mul_b[base + min(c + 2, last)], mul_b[base + min(c + 3, last)]);
}

// in[t, c .. c + 3]: gelu_mul.comp's gelu_tanh(x) · b with gelu_b, computed as it loads.
vec4 load_x_quad(uint t, uint c) {
  const vec4 a = load_x4(t * pc.x_stride, c);
  if (pc.gelu_b == 0u) return a;
  const vec4 g = vec4(gelu_tanh(a.x), gelu_tanh(a.y), gelu_tanh(a.z), gelu_tanh(a.w));
  return g * load_b4(t * pc.b_stride + pc.b_off, c);
}

#define MATVEC_Y o
#include "matvec_rows.glsl"

shared float red_partial[kMaxSubgroups * 2];
shared bool last_sh;
#include "common/reduce.glsl"
#include "norm_row.glsl"
// One workgroup of matvec.comp's few subgroups does the row (add_norm.comp has 512 invocations):
// twice kBatch loads in flight each, so a row of H = 1536 takes two rounds of loads a pass on 64
// invocations. The registers are free: the product's loop holds more.
#define ADD_NORM_BATCH (2 * kBatch)
#include "add_norm_row.glsl"

void main() {
  matvec_rows();
  // Count this workgroup in. The release half of the barrier orders every invocation's o writes
  // before invocation 0's device-scope atomic; the acquire half of the one after it makes the
  // other workgroups' o rows visible to the whole last workgroup.
  controlBarrier(gl_ScopeWorkgroup, gl_ScopeDevice, gl_StorageSemanticsBuffer,
                 gl_SemanticsAcquireRelease);
  if (gl_LocalInvocationIndex == 0) {
    const uint groups = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_NumWorkGroups.z;
    const uint before = atomicAdd(counter[0], 1u, gl_ScopeDevice, gl_StorageSemanticsBuffer,
                                  gl_SemanticsAcquireRelease);
    last_sh = before == groups - 1;
    if (last_sh) {  // every workgroup has counted: reset for the next dispatch
      atomicStore(counter[0], 0u, gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsRelaxed);
    }
  }
  controlBarrier(gl_ScopeWorkgroup, gl_ScopeDevice,
                 gl_StorageSemanticsBuffer | gl_StorageSemanticsShared, gl_SemanticsAcquireRelease);
  if (!last_sh) return;  // uniform: the workgroup's one shared flag
  for (uint t = 0; t < pc.n_tokens; ++t) add_norm_row(t * pc.y_stride, pc.rows);
}
