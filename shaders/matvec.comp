// Matrix-vector (T = 1) and small-T matrix-matrix product, f32 activations and accumulation:
//   W: binding 0, [rows, cols] in the device layout of W_* (common/weights.glsl)
//   x: binding 1, [n_tokens, x_stride] f32        y: binding 2, [n_tokens, y_stride] f32
//   GATE_UP only: binding 3, the up matrix, like W (which is then the gate); y = gelu(g) · u
//   push: MatvecPush (matvec.h). spec: LOCAL_SIZE invocations = SUBGROUPS subgroups of the
//   device's size; ROWS rows per subgroup, TOKENS tokens per workgroup.
// Workgroup g = x + z * num_x owns rows [SUBGROUPS * ROWS * g, ...), subgroup s of it ROWS of them,
// summed with subgroupAdd: no shared memory, no barrier. Lane l reads vectors l, l + S, ... (S the
// subgroup size) of each of its rows, VEC_UNROLL × ROWS (× 2 for gate-up) 16-byte loads issued
// before the first is used, and the activations of each vector once for all its rows. Workgroup y
// owns tokens [TOKENS * y, ...); a partial last token group repeats the last token (not stored).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#include "matvec.h"

layout(local_size_x_id = INFER_MATVEC_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_MATVEC_SPEC_ROWS) const uint kRows = 1;
layout(constant_id = INFER_MATVEC_SPEC_TOKENS) const uint kTokens = 1;
layout(constant_id = INFER_MATVEC_SPEC_SUBGROUPS) const uint kSubgroups = 1;

layout(binding = 1, std430) readonly buffer X { float x[]; };
layout(binding = 1, std430) readonly buffer X4 { vec4 x4[]; };
layout(binding = 2, std430) writeonly buffer Y { float y[]; };

#ifdef GATE_UP
#define W_PAIR
#define W_PAIR_BINDING INFER_MATVEC_BINDING_UP
const uint kMats = 2;  // gate, then up
#include "common/gelu.glsl"
#else
const uint kMats = 1;
#endif
#include "common/weights.glsl"

const uint kLoads = kMats * VEC_UNROLL * kRows;  // vectors in flight per lane

// x[xb + c .. c + 3]; a quad past cols (zero weights) reads the last one instead.
vec4 load_x_quad(uint xb, uint c) {
  if ((pc.cols & 3u) == 0u && (pc.x_stride & 3u) == 0u) return x4[(xb + min(c, pc.cols - 4)) / 4];
  const uint last = pc.cols - 1;
  return vec4(x[xb + min(c, last)], x[xb + min(c + 1, last)], x[xb + min(c + 2, last)],
              x[xb + min(c + 3, last)]);
}

void main() {
  const uint lanes = gl_SubgroupSize, lane = gl_SubgroupInvocationID;
  const uint group = gl_WorkGroupID.z * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  const uint t0 = gl_WorkGroupID.y * kTokens;
  const uint n_vecs = w_vecs();
  // Subgroup slots of the workgroup: one each when the driver gives kSubgroups subgroups.
  for (uint slot = gl_SubgroupID; slot < kSubgroups; slot += gl_NumSubgroups) {
    const uint row0 = (group * kSubgroups + slot) * kRows;
    if (row0 >= pc.rows) break;  // uniform in the subgroup
    uint rows[kRows];            // rows past the end repeat the last (not stored)
    for (uint r = 0; r < kRows; ++r) rows[r] = min(row0 + r, pc.rows - 1);

    float acc[kMats * kRows * kTokens];
    for (uint i = 0; i < kMats * kRows * kTokens; ++i) acc[i] = 0.0;

    for (uint j0 = lane; j0 < n_vecs; j0 += VEC_UNROLL * lanes) {
      // Issue every load of this step first; a vector past the row repeats the last (its sum is
      // dropped below).
      uvec4 wv[kLoads];
#ifdef W_SCALED
      uvec4 sv[kLoads];
#endif
      for (uint u = 0; u < VEC_UNROLL; ++u) {
        const uint j = min(j0 + u * lanes, n_vecs - 1);
        for (uint r = 0; r < kRows; ++r) {
          wv[u * kRows + r] = load_vec_of(0u, rows[r], j);
#ifdef W_SCALED
          sv[u * kRows + r] = load_scales_of(0u, rows[r], j);
#endif
#ifdef GATE_UP
          wv[(VEC_UNROLL + u) * kRows + r] = load_vec_of(1u, rows[r], j);
#ifdef W_SCALED
          sv[(VEC_UNROLL + u) * kRows + r] = load_scales_of(1u, rows[r], j);
#endif
#endif
        }
      }
      for (uint u = 0; u < VEC_UNROLL; ++u) {
        const uint j = j0 + u * lanes;
        const float keep = j < n_vecs ? 1.0 : 0.0;
        const uint jc = min(j, n_vecs - 1);
        for (uint t = 0; t < kTokens; ++t) {
          const uint xb = min(t0 + t, pc.n_tokens - 1) * pc.x_stride;
          vec4 xq[VEC_QUADS];
          for (uint q = 0; q < VEC_QUADS; ++q) xq[q] = load_x_quad(xb, vec_quad_col(jc, q));
          for (uint m = 0; m < kMats; ++m) {
            for (uint r = 0; r < kRows; ++r) {
              const uint i = (m * VEC_UNROLL + u) * kRows + r;
#ifdef W_SCALED
              acc[(m * kRows + r) * kTokens + t] += keep * vec_dot(wv[i], sv[i], jc, xq);
#else
              acc[(m * kRows + r) * kTokens + t] += keep * vec_dot(wv[i], uvec4(0), jc, xq);
#endif
            }
          }
        }
      }
    }

    for (uint i = 0; i < kMats * kRows * kTokens; ++i) acc[i] = subgroupAdd(acc[i]);
    if (lane == 0) {
      for (uint r = 0; r < kRows; ++r) {
        for (uint t = 0; t < kTokens; ++t) {
          if (row0 + r >= pc.rows || t0 + t >= pc.n_tokens) continue;
#ifdef GATE_UP
          const float g = acc[r * kTokens + t], u = acc[(kRows + r) * kTokens + t];
          y[(t0 + t) * pc.y_stride + row0 + r] = gelu_tanh(g) * u;
#else
          y[(t0 + t) * pc.y_stride + row0 + r] = acc[r * kTokens + t];
#endif
        }
      }
    }
  }
}
