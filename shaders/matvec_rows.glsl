// The body of matvec.comp: this workgroup's rows of y = W · x for its tokens. The includer declares the spec constants kRows,
// kTokens, kSubgroups, the constant kMats (2: GATE_UP), a push block with MatvecPush's fields,
// includes common/weights.glsl (and common/gelu.glsl for GATE_UP), and defines
//   vec4 load_x_quad(uint t, uint c): the activations x[t, c .. c + 3] of token t, and
//   MATVEC_Y: the output array, [n_tokens, y_stride] f32;
// and optionally (matvec.comp does; by default VEC_UNROLL and 1)
//   MATVEC_UNROLL: a constant, the vectors of each row a lane loads per round;
//   MATVEC_SPLIT: a uniform uint dividing kSubgroups, the subgroups that share a row.
// Workgroup g = x + z * num_x owns rows [slots * ROWS * g, ...), slots = SUBGROUPS / split; slot
// s of them ROWS rows, summed by the split subgroups s * split .. s * split + split - 1: part p
// reads the rows' chunks p, p + split, ... (a chunk = S consecutive 16-byte vectors, S the
// subgroup size, one a lane), UNROLL chunks a row per round, every load of a round issued before
// the first is used; the activations of each vector are loaded once for all its rows. A part's
// sums go through subgroupAdd, then (split > 1) shared memory, added in part order: rows of
// 13312-16384 columns split over 4 subgroups take a quarter of the rounds, and matrices of few
// rows still fill a big GPU. Workgroup y owns tokens [TOKENS * y, ...); a partial last token
// group repeats the last token (not stored).

#ifndef MATVEC_UNROLL
#define MATVEC_UNROLL VEC_UNROLL
#endif
#ifndef MATVEC_SPLIT
#define MATVEC_SPLIT 1u  // the split branches below fold away, with the shared memory
#endif

const uint kLoads = kMats * MATVEC_UNROLL * kRows;  // vectors in flight per lane
const uint kSums = kMats * kRows * kTokens;         // a subgroup's sums: [mats][rows][tokens]

shared float mv_part_sums[kSubgroups * kSums];  // [subgroup][sum], split > 1 only

// One round's loads into wv (weight vectors) and sv (block scales, W_SCALED only): chunks c0,
// c0 + split, ... (MATVEC_UNROLL of them) of `rows`, a vector past the row repeating the last
// (its sum is dropped where it is used). Every load issued before any is used. Uses the caller's
// split, lanes, lane and n_vecs.
#ifdef W_SCALED
const uint MV_SCALE_LOADS = kLoads;
#define MV_LOAD_SCALES(sv, i, m, row, j) sv[i] = load_scales_of(m, row, j)
#else
const uint MV_SCALE_LOADS = 1;  // unused
#define MV_LOAD_SCALES(sv, i, m, row, j)
#endif
#ifdef GATE_UP
#define MV_LOAD_UP(wv, sv, u, r, row, j)                                      \
  wv[(MATVEC_UNROLL + u) * kRows + r] = load_vec_of(1u, row, j);            \
  MV_LOAD_SCALES(sv, (MATVEC_UNROLL + u) * kRows + r, 1u, row, j)
#else
#define MV_LOAD_UP(wv, sv, u, r, row, j)
#endif
#define MV_LOAD_ROUND(wv, sv, rows, c0)                                       \
  for (uint u = 0; u < MATVEC_UNROLL; ++u) {                                  \
    const uint j = min((c0 + u * split) * lanes + lane, n_vecs - 1);          \
    for (uint r = 0; r < kRows; ++r) {                                        \
      wv[u * kRows + r] = load_vec_of(0u, rows[r], j);                        \
      MV_LOAD_SCALES(sv, u * kRows + r, 0u, rows[r], j);                      \
      MV_LOAD_UP(wv, sv, u, r, rows[r], j);                                   \
    }                                                                         \
  }

// y[t, row] from the sums of the row's matrices (gate-up: gelu(gate) · up), inside the output.
void matvec_store(uint row, uint t, float gate, float up) {
  if (row >= pc.rows || t >= pc.n_tokens) return;
#ifdef GATE_UP
  MATVEC_Y[t * pc.y_stride + row] = gelu_tanh(gate) * up;
#else
  MATVEC_Y[t * pc.y_stride + row] = gate;
#endif
}

void matvec_rows() {
  const uint lanes = gl_SubgroupSize, lane = gl_SubgroupInvocationID;
  const uint group = gl_WorkGroupID.z * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  const uint t0 = gl_WorkGroupID.y * kTokens;
  const uint n_vecs = w_vecs();
  const uint n_chunks = (n_vecs + lanes - 1) / lanes;
  const uint split = MATVEC_SPLIT;
  const uint slots = kSubgroups / split;
  // Subgroup ids of the workgroup: one each when the driver gives kSubgroups subgroups.
  for (uint sg = gl_SubgroupID; sg < kSubgroups; sg += gl_NumSubgroups) {
    const uint part = sg % split;
    const uint row0 = (group * slots + sg / split) * kRows;
    if (row0 >= pc.rows) break;  // uniform in the subgroup; later ids have later rows
    uint rows[kRows];            // rows past the end repeat the last (not stored)
    for (uint r = 0; r < kRows; ++r) rows[r] = min(row0 + r, pc.rows - 1);

    float acc[kSums];
    for (uint i = 0; i < kSums; ++i) acc[i] = 0.0;
    uvec4 wv[kLoads];
    uvec4 sv[MV_SCALE_LOADS];

    for (uint c0 = part; c0 < n_chunks; c0 += split * MATVEC_UNROLL) {
      // Issue every load of this round first; a vector past the row repeats the last (its sum is
      // dropped below).
      MV_LOAD_ROUND(wv, sv, rows, c0);
      for (uint u = 0; u < MATVEC_UNROLL; ++u) {
        const uint j = (c0 + u * split) * lanes + lane;
        const float keep = j < n_vecs ? 1.0 : 0.0;
        const uint jc = min(j, n_vecs - 1);
        for (uint t = 0; t < kTokens; ++t) {
          const uint tt = min(t0 + t, pc.n_tokens - 1);
          vec4 xq[VEC_QUADS];
          for (uint q = 0; q < VEC_QUADS; ++q) xq[q] = load_x_quad(tt, vec_quad_col(jc, q));
          for (uint m = 0; m < kMats; ++m) {
            for (uint r = 0; r < kRows; ++r) {
              const uint i = (m * MATVEC_UNROLL + u) * kRows + r;
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

    for (uint i = 0; i < kSums; ++i) acc[i] = subgroupAdd(acc[i]);
    if (lane == 0) {
      if (split > 1) {
        for (uint i = 0; i < kSums; ++i) mv_part_sums[sg * kSums + i] = acc[i];
      } else {
        for (uint r = 0; r < kRows; ++r) {
          for (uint t = 0; t < kTokens; ++t) {
            const uint i = r * kTokens + t;
            matvec_store(row0 + r, t0 + t, acc[i], acc[(kMats - 1) * kRows * kTokens + i]);
          }
        }
      }
    }
  }

  if (split > 1) {  // uniform: a push constant
    barrier();
    // Output (slot, r, t) of the workgroup: its parts' sums, in part order.
    const uint per_slot = kRows * kTokens;
    for (uint o = gl_LocalInvocationIndex; o < slots * per_slot; o += gl_WorkGroupSize.x) {
      const uint slot = o / per_slot, i = o % per_slot;  // i = r * kTokens + t
      float gate = 0.0, up = 0.0;
      for (uint p = 0; p < split; ++p) {
        const uint base = (slot * split + p) * kSums;
        gate += mv_part_sums[base + i];
        up += mv_part_sums[base + (kMats - 1) * per_slot + i];
      }
      matvec_store((group * slots + slot) * kRows + i / kTokens, t0 + i % kTokens, gate, up);
    }
  }
}
