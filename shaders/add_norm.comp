// The residual step that ends a block (GEMMA4_TEXT.md §4.4), one workgroup per token t:
//   x[t] = (x[t] + rmsnorm(o[t]) · w_post) · scale
// and with FUSE_NEXT h[t] = rmsnorm(x[t]) · next_w, the next block's input norm, while x[t] is
// still in the cache (add_norm_row.glsl), the whole row held in registers. Rows longer than the
// workgroup holds take add_norm_long.comp.
//   x: binding 0, [T, n] f32 (read and written)   o: binding 1, [T, n] f32
//   w_post: binding 2, [n] f32
//   FUSE_NEXT: next_w binding 3, [n] f32; h binding 4, [T, n] f32
//   push: NormPush (rms_norm.h), rows = T. spec: LOCAL_SIZE invocations, MAX_SUBGROUPS,
//   PER_INVOCATION: the elements an invocation holds (the host takes it for
//   n <= LOCAL_SIZE · PER_INVOCATION).
//   INT8_OUT (with FUSE_NEXT): h also as the integer-dot matvecs take it, binding 5, as
//   coop_x_prep.comp's INT8 writes it (int8 quads [T][n / 4], then f32 scales [T][n / 32],
//   n % 32 == 0), so the next product needs no dispatch of its own to quantize it.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#include "rms_norm.h"

layout(local_size_x_id = INFER_NORM_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_NORM_SPEC_MAX_SUBGROUPS) const uint kMaxSubgroups = 32;

layout(binding = 0, std430) buffer X { float stream[]; };
layout(binding = 1, std430) readonly buffer O { float o[]; };
layout(binding = 2, std430) readonly buffer WPost { float w_post[]; };
#if defined(FUSE_NEXT)
layout(binding = 3, std430) readonly buffer WNext { float next_w[]; };
layout(binding = 4, std430) writeonly buffer Hout { float h[]; };
#endif
#ifdef INT8_OUT
layout(binding = 5, std430) writeonly buffer HInt8Q { uint h_int8_words[]; };
layout(binding = 5, std430) writeonly buffer HInt8D { float h_int8_scales[]; };
#include "common/quant_x.glsl"
#endif

shared float red_partial[kMaxSubgroups * 2];
#include "common/reduce.glsl"
#include "norm_row.glsl"
layout(constant_id = INFER_NORM_SPEC_PER_INVOCATION) const uint kPerInvocation = 8;
#define ADD_NORM_PER_INVOCATION kPerInvocation
#ifdef INT8_OUT
// The row's h, for blocks across invocations.
shared float h_row[gl_WorkGroupSize.x * kPerInvocation];
#define ADD_NORM_H_SHARED h_row
#endif
#include "add_norm_row.glsl"

#ifdef INT8_OUT
// Row t's h from h_row, block by block, quantized as coop_x_prep.comp does it.
void write_int8_h(uint t) {
  barrier();
  const uint n = pc.n, blocks = n / 32;
  for (uint b = gl_LocalInvocationID.x; b < blocks; b += gl_WorkGroupSize.x) {
    QUANT_X_STORE_BLOCK(h_row, 32 * b, h_int8_words, t * (n / 4) + 8 * b, h_int8_scales,
                        pc.rows * (n / 4) + t * blocks + b);
  }
}
#endif

void main() {
  const uint t = row_index();
  if (t >= pc.rows) return;  // whole workgroup: the grid is rounded up in y
  add_norm_row_in_registers(t * pc.n, pc.n);
#ifdef INT8_OUT
  write_int8_h(t);
#endif
}
