// Merges the split-K partials of attend.comp (GEMMA4_TEXT.md §4.7: one softmax over all keys):
//   scratch: binding 0, o [n_splits, n_rows, d], then (m, l) [n_splits, n_rows, 2] f32
//   out:     binding 1, [n_rows, d] f32 (n_rows = T · n_q)
//   push: AttendCombinePush (attention.h). spec: LOCAL_SIZE.
// Workgroup x does row x: out = sum_s e^(m_s - M) o_s / sum_s e^(m_s - M) l_s, M = max_s m_s.
// A split that saw no key has m = -3e38, l = 0 and o = 0, and weighs e^(m - M) = 0.
#version 450
#extension GL_GOOGLE_include_directive : require

#define INFER_ATTN_COMBINE
#include "attention.h"

layout(local_size_x_id = INFER_ATTN_SPEC_LOCAL_SIZE) in;

layout(binding = 0, std430) readonly buffer Scratch { float scratch[]; };
layout(binding = 1, std430) writeonly buffer Out { float out_rows[]; };

void main() {
  const uint row = gl_WorkGroupID.x;
  const uint n_rows = pc.n_rows, d = pc.d;
  const uint ml = pc.n_splits * n_rows * d;
  float m = scratch[ml + row * 2];
  for (uint s = 1; s < pc.n_splits; ++s) m = max(m, scratch[ml + (s * n_rows + row) * 2]);
  float l = 0.0;
  for (uint s = 0; s < pc.n_splits; ++s) {
    const uint i = ml + (s * n_rows + row) * 2;
    l += exp(scratch[i] - m) * scratch[i + 1];
  }
  const float inv_l = 1.0 / l;
  for (uint j = gl_LocalInvocationID.x; j < d; j += gl_WorkGroupSize.x) {
    float o = 0.0;
    for (uint s = 0; s < pc.n_splits; ++s) {
      o += exp(scratch[ml + (s * n_rows + row) * 2] - m) * scratch[(s * n_rows + row) * d + j];
    }
    out_rows[row * d + j] = o * inv_l;
  }
}
