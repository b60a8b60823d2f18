// Decode's product with the residual step before it folded into its prologue (one token):
//   s = (x + rmsnorm(o) · w_post) · scale          with INFER_NORM_IN_ADD, else s = x
//   in = rmsnorm(s) · norm_w                       with INFER_NORM_IN_NORM, else in = s
//   in[c] = gelu_tanh(x[c]) · b[b_off + c]         with INFER_NORM_IN_GELU (alone)
//   y = W · in (GATE_UP: y = gelu(G · in) ⊙ (U · in)), as matvec.comp computes it
//   W: binding 0, [rows, cols] in the device layout of W_* (common/weights.glsl)
//   x: binding 1, [cols] f32      y: binding 2, [rows] f32      o: binding 3, [cols] f32
//   w_post: binding 4, [cols]     norm_w: binding 5, [cols]     x_out: binding 6, [cols] f32
//   b: binding 7 f32              GATE_UP: binding 8, the up matrix, like W
//   push: MatvecNormInPush (matvec_norm_in.h). spec: LOCAL_SIZE = SUBGROUPS subgroups of the
//   device's size, ROWS rows per subgroup slot, SLOTS slots per subgroup, MAX_SUBGROUPS, QUADS,
//   PREFETCH (each subgroup's first round of weights issued before the prologue).
// Every workgroup stages `in` in shared memory itself, from inputs a few KB long that stay in the
// cache, instead of a separate add_norm dispatch writing h for the product to read: on a big GPU
// a decode dispatch costs ~5 us of launch and drain whatever its work. Workgroup 0 also writes s
// to x_out, the stream for the rest of the layer; x_out is another buffer than x (the forward
// alternates two), since every workgroup reads x while it is written. The product is
// matvec_rows.glsl with load_x_quad reading the staged input; a workgroup owns SUBGROUPS · slots
// subgroup slots of ROWS rows, so a matrix of many rows pays for the prologue fewer times.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#include "matvec_norm_in.h"

layout(local_size_x_id = INFER_NORM_IN_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_NORM_IN_SPEC_ROWS) const uint kRows = 1;
layout(constant_id = INFER_NORM_IN_SPEC_SUBGROUPS) const uint kGroupSubgroups = 1;
layout(constant_id = INFER_NORM_IN_SPEC_MAX_SUBGROUPS) const uint kMaxSubgroups = 32;
layout(constant_id = INFER_NORM_IN_SPEC_QUADS) const uint kQuads = 1;
layout(constant_id = INFER_NORM_IN_SPEC_SLOTS) const uint kSlots = 1;
layout(constant_id = INFER_NORM_IN_SPEC_PREFETCH) const bool kPrefetch = false;
const uint kTokens = 1;
// matvec_rows.glsl's subgroup slots of a workgroup: each subgroup takes kSlots of them in turn.
const uint kSubgroups = kGroupSubgroups * kSlots;

layout(binding = 1, std430) readonly buffer X { float x[]; };
layout(binding = 1, std430) readonly buffer X4 { vec4 x4[]; };
layout(binding = 2, std430) writeonly buffer Y { float y[]; };
layout(binding = 3, std430) readonly buffer O { float o[]; };
layout(binding = 3, std430) readonly buffer O4 { vec4 o4[]; };
layout(binding = 4, std430) readonly buffer WPost { float w_post[]; };
layout(binding = 4, std430) readonly buffer WPost4 { vec4 w_post4[]; };
layout(binding = 5, std430) readonly buffer NormW { float norm_w[]; };
layout(binding = 5, std430) readonly buffer NormW4 { vec4 norm_w4[]; };
layout(binding = 6, std430) writeonly buffer XOut { float x_out[]; };
layout(binding = 6, std430) writeonly buffer XOut4 { vec4 x_out4[]; };
layout(binding = 7, std430) readonly buffer B { float mul_b[]; };

#ifdef GATE_UP
#define W_PAIR
#define W_PAIR_BINDING INFER_NORM_IN_BINDING_UP
const uint kMats = 2;  // gate, then up
#else
const uint kMats = 1;
#endif
#include "common/gelu.glsl"
#include "common/weights.glsl"

shared vec4 staged[kQuads];  // `in`, zero past cols up to the row's padding
shared float red_partial[kMaxSubgroups * 2];
#include "common/reduce.glsl"
#include "norm_row.glsl"

// Quad q (columns 4q .. 4q + 3) of a [cols] array; columns past cols read 0. Vector loads where
// the host allows them (INFER_NORM_IN_VEC4).
#define QUAD_OF(name, name4, q)                                            \
  (whole ? name4[q]                                                        \
         : vec4(4 * (q) < pc.cols ? name[4 * (q)] : 0.0,                   \
                4 * (q) + 1 < pc.cols ? name[4 * (q) + 1] : 0.0,           \
                4 * (q) + 2 < pc.cols ? name[4 * (q) + 2] : 0.0,           \
                4 * (q) + 3 < pc.cols ? name[4 * (q) + 3] : 0.0))

// Quads of each input an invocation loads at once, before the first reduction: with the
// workgroup sized to the row (gpu/ops/matvec_norm_in.cpp: 16 columns an invocation), the whole
// row, so the prologue waits for one round of loads rather than one per pass.
const uint kQuadBatch = 4;

// Workgroup 0's copy of the stream after the step.
void store_stream(bool whole, uint q, vec4 s) {
  if (whole) {
    x_out4[q] = s;
    return;
  }
  for (uint e = 0; e < 4; ++e) {
    if (4 * q + e < pc.cols) x_out[4 * q + e] = s[e];
  }
}

// Stages `in` as the flags say. Uniform control flow: every invocation takes part.
void stage_input() {
  const bool whole = (pc.flags & INFER_NORM_IN_VEC4) != 0u;
  const uint n_quads = (pc.cols + 3) / 4;
  const uint padded = w_vecs() * VEC_QUADS;  // quads the product reads: the row's padding
  const uint step = gl_WorkGroupSize.x, lid = gl_LocalInvocationID.x;
  for (uint q = n_quads + lid; q < padded; q += step) staged[q] = vec4(0.0);

  if ((pc.flags & INFER_NORM_IN_GELU) != 0u) {
    for (uint q = lid; q < n_quads; q += step) {
      const vec4 g = QUAD_OF(x, x4, q);
      vec4 b;
      for (uint e = 0; e < 4; ++e) {
        const uint c = 4 * q + e;
        b[e] = c < pc.cols ? mul_b[pc.b_off + c] : 0.0;
      }
      staged[q] = vec4(gelu_tanh(g.x), gelu_tanh(g.y), gelu_tanh(g.z), gelu_tanh(g.w)) * b;
    }
    barrier();
    return;
  }

  const bool add = (pc.flags & INFER_NORM_IN_ADD) != 0u;
  const bool norm = (pc.flags & INFER_NORM_IN_NORM) != 0u;
  const bool writer = add && gl_WorkGroupID.x == 0 && gl_WorkGroupID.z == 0;
  // This invocation's quads lid + k · step, k < kQuadBatch, every input loaded at once; quads
  // past them (a workgroup smaller than the row) are loaded where used, from `rest` on.
  vec4 xv[kQuadBatch], ov[kQuadBatch], wv[kQuadBatch], nv[kQuadBatch];
  for (uint k = 0, q = lid; k < kQuadBatch; ++k, q += step) {
    const bool in_row = q < n_quads;
    xv[k] = in_row ? QUAD_OF(x, x4, q) : vec4(0.0);
    ov[k] = in_row && add ? QUAD_OF(o, o4, q) : vec4(0.0);
    wv[k] = in_row && add ? QUAD_OF(w_post, w_post4, q) : vec4(0.0);
    nv[k] = in_row && norm ? QUAD_OF(norm_w, norm_w4, q) : vec4(0.0);
  }
  const uint rest = lid + kQuadBatch * step;

  float inv = 0.0;
  if (add) {
    float sum_sq = 0.0;
    for (uint k = 0; k < kQuadBatch; ++k) sum_sq += dot(ov[k], ov[k]);
    for (uint q = rest; q < n_quads; q += step) {
      const vec4 v = QUAD_OF(o, o4, q);
      sum_sq += dot(v, v);
    }
    inv = inv_rms(workgroup_sum(sum_sq), pc.cols, pc.eps);
  }

  // s, staged; each invocation rereads only the quads it staged itself, so no barrier before
  // the norm below. add_norm_row.glsl's expression, so the two round alike.
  float next_sum_sq = 0.0;
  for (uint k = 0, q = lid; k < kQuadBatch; ++k, q += step) {
    const vec4 s = add ? (xv[k] + ov[k] * inv * wv[k]) * pc.scale : xv[k];
    if (q < n_quads) {
      staged[q] = s;
      if (writer) store_stream(whole, q, s);
    }
    next_sum_sq += dot(s, s);  // 0 past the row
  }
  for (uint q = rest; q < n_quads; q += step) {
    const vec4 xq = QUAD_OF(x, x4, q);
    const vec4 s =
        add ? (xq + QUAD_OF(o, o4, q) * inv * QUAD_OF(w_post, w_post4, q)) * pc.scale : xq;
    staged[q] = s;
    if (writer) store_stream(whole, q, s);
    next_sum_sq += dot(s, s);
  }

  if (norm) {
    const float next_inv = inv_rms(workgroup_sum(next_sum_sq), pc.cols, pc.eps);
    for (uint k = 0, q = lid; k < kQuadBatch; ++k, q += step) {
      if (q < n_quads) staged[q] = staged[q] * next_inv * nv[k];
    }
    for (uint q = rest; q < n_quads; q += step) {
      staged[q] = staged[q] * next_inv * QUAD_OF(norm_w, norm_w4, q);
    }
  }
  barrier();
}

// The staged input's columns c .. c + 3 (c % 4 == 0, within the row's padding).
vec4 load_x_quad(uint t, uint c) { return staged[c / 4]; }

#define MATVEC_Y y
#define MATVEC_PREFETCH kPrefetch
#include "matvec_rows.glsl"

void main() {
  if (kPrefetch) matvec_rows_prefetch();  // in flight while the input is staged
  stage_input();
  matvec_rows();
}
