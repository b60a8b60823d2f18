// The body of matvec.comp, shared with matvec_add_norm.comp (which adds an epilogue): this
// workgroup's rows of y = W · x for its tokens. The includer declares the spec constants kRows,
// kTokens, kSubgroups, the constant kMats (2: GATE_UP), a push block with MatvecPush's fields,
// includes common/weights.glsl (and common/gelu.glsl for GATE_UP), and defines
//   vec4 load_x_quad(uint t, uint c): the activations x[t, c .. c + 3] of token t, and
//   MATVEC_Y: the output array, [n_tokens, y_stride] f32.
// Workgroup g = x + z * num_x owns rows [SUBGROUPS * ROWS * g, ...), subgroup s of it ROWS of them,
// summed with subgroupAdd: no shared memory, no barrier. Lane l reads vectors l, l + S, ... (S the
// subgroup size) of each of its rows, VEC_UNROLL × ROWS (× 2 for gate-up) 16-byte loads issued
// before the first is used, and the activations of each vector once for all its rows. Workgroup y
// owns tokens [TOKENS * y, ...); a partial last token group repeats the last token (not stored).
// Never returns early: matvec_add_norm.comp counts every workgroup in after it.

const uint kLoads = kMats * VEC_UNROLL * kRows;  // vectors in flight per lane

void matvec_rows() {
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
          const uint tt = min(t0 + t, pc.n_tokens - 1);
          vec4 xq[VEC_QUADS];
          for (uint q = 0; q < VEC_QUADS; ++q) xq[q] = load_x_quad(tt, vec_quad_col(jc, q));
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
          MATVEC_Y[(t0 + t) * pc.y_stride + row0 + r] = gelu_tanh(g) * u;
#else
          MATVEC_Y[(t0 + t) * pc.y_stride + row0 + r] = acc[r * kTokens + t];
#endif
        }
      }
    }
  }
}
