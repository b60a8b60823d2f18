// Matrix-vector (T = 1) and small-T matrix-matrix product, f32 activations and accumulation:
//   W: binding 0, [rows, cols] in the format chosen by W_* (common/weights.glsl)
//   x: binding 1, [n_tokens, x_stride] f32        y: binding 2, [n_tokens, y_stride] f32
//   GATE_UP only: binding 3, the up matrix, like W (which is then the gate); y = gelu(g) · u
//   push: MatvecPush (matvec.h). spec: LOCAL_SIZE invocations, ROWS rows and TOKENS tokens per
//   workgroup, MAX_SUBGROUPS >= gl_NumSubgroups. Workgroup (x + z * num_x) owns rows
//   [ROWS * g, ROWS * (g + 1)); workgroup y owns tokens [TOKENS * y, TOKENS * (y + 1)).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_shader_16bit_storage : require

#include "matvec.h"

layout(local_size_x_id = INFER_MATVEC_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_MATVEC_SPEC_ROWS) const uint kRows = 1;
layout(constant_id = INFER_MATVEC_SPEC_TOKENS) const uint kTokens = 1;
layout(constant_id = INFER_MATVEC_SPEC_MAX_SUBGROUPS) const uint kMaxSubgroups = 32;

layout(binding = 1, std430) readonly buffer X { float x[]; };
layout(binding = 2, std430) writeonly buffer Y { float y[]; };

#ifdef GATE_UP
#define W_PAIR
#define W_PAIR_BINDING INFER_MATVEC_BINDING_UP
const uint kMats = 2;  // gate sums at [0, n), up sums at [n, 2n)
#include "common/gelu.glsl"
#else
const uint kMats = 1;
#endif
#include "common/weights.glsl"

shared float red_partial[kMaxSubgroups * kMats * kRows * kTokens];
#include "common/reduce.glsl"

void main() {
  const uint n_sums = kRows * kTokens;  // per matrix
  const uint row0 = (gl_WorkGroupID.z * gl_NumWorkGroups.x + gl_WorkGroupID.x) * kRows;
  const uint t0 = gl_WorkGroupID.y * kTokens;
  if (row0 >= pc.rows) return;  // whole workgroup: the grid is rounded up in z
  const uint n_rows = min(kRows, pc.rows - row0);
  const uint n_tok = min(kTokens, pc.n_tokens - t0);

  float acc[kMats * kRows * kTokens];
  for (uint i = 0; i < kMats * n_sums; ++i) acc[i] = 0.0;

  const uint n_units = units_per_row();
  for (uint u = gl_LocalInvocationID.x; u < n_units; u += gl_WorkGroupSize.x) {
    float xv[UNIT * kTokens];
    for (uint t = 0; t < n_tok; ++t) {
      const uint xb = (t0 + t) * pc.x_stride;
      for (uint k = 0; k < UNIT; ++k) xv[t * UNIT + k] = x[xb + unit_col(u, k)];
    }
    for (uint r = 0; r < n_rows; ++r) {
      // Literal matrix indices, so the choice in decode_unit_of folds away.
      float w[UNIT];
      decode_unit_of(0u, row0 + r, u, w);
      for (uint t = 0; t < n_tok; ++t) {
        float s = 0.0;
        for (uint k = 0; k < UNIT; ++k) s += w[k] * xv[t * UNIT + k];
        acc[r * kTokens + t] += s;
      }
#ifdef GATE_UP
      decode_unit_of(1u, row0 + r, u, w);
      for (uint t = 0; t < n_tok; ++t) {
        float s = 0.0;
        for (uint k = 0; k < UNIT; ++k) s += w[k] * xv[t * UNIT + k];
        acc[n_sums + r * kTokens + t] += s;
      }
#endif
    }
  }

  for (uint i = 0; i < kMats * n_sums; ++i) red_add(acc[i], i, kMats * n_sums);
  barrier();
  for (uint i = gl_LocalInvocationID.x; i < n_sums; i += gl_WorkGroupSize.x) {
    const uint r = i / kTokens, t = i % kTokens;
    if (r < n_rows && t < n_tok) {
#ifdef GATE_UP
      const float g = red_total(i, 2 * n_sums), u = red_total(n_sums + i, 2 * n_sums);
      y[(t0 + t) * pc.y_stride + row0 + r] = gelu_tanh(g) * u;
#else
      y[(t0 + t) * pc.y_stride + row0 + r] = red_total(i, n_sums);
#endif
    }
  }
}
