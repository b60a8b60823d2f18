// attend_split.comp's INFER_ATTN_PREP part: qkv_prep.comp's work for T = 1 done by the attention
// workgroups themselves, which saves the dispatch (and its dependent step, ~5 us on the H200)
// between the two (attention.h, AttendPrepPush). Every workgroup norms, weights and rotates its
// own query heads from the raw q|k|v row (the same arithmetic as qkv_prep.comp, sums in another
// order); split 0's write them to q_out too (the key-mass pass reads them). The split holding
// the token's own key (the last key) norms its KV head's K (weight, RoPE) and V (no weight)
// likewise, attends to them from shared memory after its tiles (attend_own_key), and the first
// head group's writes them into the ring: rotated in the exact mode, before RoPE in the ring
// modes, as qkv_prep.comp stores them. No other workgroup reads that ring row in this dispatch.
// A KV-shared layer (prep_kv 0) writes nothing: its donor's ring already holds the token.
// Its rows' loads go out with the first tile's, before the prologue's barriers; the rest of its
// registers live only inside the prologue (the tile's K/V loads are in flight beside them).
// Bindings beyond attend_split.comp's: 1 qkv (raw, the row of q heads, K at k_offset, V at
// v_offset), 2 and 3 the ring (written here), 8 q_norm, 9 k_norm, 10 q_out [n_q, d].

layout(binding = 1, std430) readonly buffer Qkv { float qkv[]; };
layout(binding = 2, std430) writeonly buffer KCacheOut { float k_cache_out[]; };
layout(binding = 3, std430) writeonly buffer VCacheOut { float v_cache_out[]; };
layout(binding = 8, std430) readonly buffer QNorm { float q_norm[]; };
layout(binding = 9, std430) readonly buffer KNorm { float k_norm[]; };
layout(binding = 10, std430) writeonly buffer QOut { float q_out[]; };

// Rows prepared: the workgroup's kHeads query heads, then the token's K and V.
const uint kPrepRows = kHeads + 2u;
const uint kPrepPer = (kPrepRows * kD + gl_WorkGroupSize.x - 1u) / gl_WorkGroupSize.x;
// A row's sum in kChunks strided pieces (piece j: elements j, j + kChunks, ..: consecutive
// invocations read consecutive words), then the pieces.
const uint kChunks = (kD + 15u) / 16u;

shared float prep_sh[kPrepRows * kD];  // raw rows, then products, to be summed by row
shared float chunk_sh[kPrepRows * kChunks];
shared float kp_sh[kD];  // the token's K, rotated
shared float vp_sh[kD];  // and V

// This invocation's elements u (row-major over [kPrepRows, kD]): loaded with the first tile's
// loads, held in registers (few: the tile's K/V loads are in flight beside them).
float px[kPrepPer];

uint prep_index(uint u) { return gl_LocalInvocationID.x + u * gl_WorkGroupSize.x; }

void prep_load(uint h0, uint n_heads, uint kvh, bool own_key) {
  [[unroll]] for (uint u = 0; u < kPrepPer; ++u) {
    const uint i = min(prep_index(u), kPrepRows * kD - 1u);  // past the end: a repeat, unused
    const uint r = i / kD, e = i % kD;
    const bool live = r < kHeads ? r < n_heads : own_key;
    const uint src = r < kHeads ? (h0 + r) * kD
                                : (r == kHeads ? pc.k_offset : pc.v_offset) + kvh * kD;
    px[u] = live ? qkv[src + e] : 0.0;
  }
}

// chunk_sh from prep_sh's first n_rows rows (prep_sh written before the caller's barrier), of
// the squares (squares) or the values.
void prep_chunk_sums(uint n_rows, bool squares) {
  for (uint c = gl_LocalInvocationID.x; c < n_rows * kChunks; c += gl_WorkGroupSize.x) {
    const uint r = c / kChunks, j = c % kChunks;
    float s = 0.0;
    for (uint e = j; e < kD; e += kChunks) {
      const float x = prep_sh[r * kD + e];
      s += squares ? x * x : x;
    }
    chunk_sh[c] = s;
  }
  barrier();
}

float prep_row_sum(uint r) {
  float s = 0.0;
  for (uint j = 0; j < kChunks; ++j) s += chunk_sh[r * kChunks + j];
  return s;
}

// q_sh (the workgroup's heads, rows past n_heads 0) and, for the own key's split, kp_sh and
// vp_sh; `writer` stores K and V in the ring, `q_writer` q in q_out. Ends before a barrier (the
// caller's).
void prep_finish(uint h0, uint n_heads, uint kvh, bool own_key, bool writer, bool q_writer) {
  [[unroll]] for (uint u = 0; u < kPrepPer; ++u) {
    const uint i = prep_index(u);
    if (i < kPrepRows * kD) prep_sh[i] = px[u];
  }
  barrier();
  // The weights and frequencies (small, cached: every workgroup reads them) load while the
  // sums are taken.
  const uint half_d = kD / 2u;
  float w[kPrepPer], w2[kPrepPer], f[kPrepPer];
  [[unroll]] for (uint u = 0; u < kPrepPer; ++u) {
    const uint i = min(prep_index(u), kPrepRows * kD - 1u);
    const uint r = i / kD, e = i % kD, e2 = e < half_d ? e + half_d : e - half_d;
    w[u] = r < kHeads ? q_norm[e] : k_norm[e];
    w2[u] = r < kHeads ? q_norm[e2] : k_norm[e2];
    f[u] = inv_freq[min(e, e2)];
  }
  prep_chunk_sums(kPrepRows, true);
  const uint rope_pos = kv_cache_pos0();
  const uint slot = kKvMode == INFER_KV_TIERED ? pc.slots : step[INFER_STEP_POS0] % pc.slots;
  const uint ring_row = (slot * pc.n_kv + kvh) * kD;
  [[unroll]] for (uint u = 0; u < kPrepPer; ++u) {
    const uint i = prep_index(u);
    if (i >= kPrepRows * kD) continue;
    const uint r = i / kD, e = i % kD, e2 = e < half_d ? e + half_d : e - half_d;
    if (r < kHeads && r >= n_heads) {
      q_sh[i] = 0.0;
      continue;
    }
    if (r >= kHeads && !own_key) continue;
    const float inv = 1.0 / sqrt(prep_row_sum(r) / float(kD) + pc.eps);
    if (r == kHeads + 1u) {  // V: no weight, no RoPE
      const float v = px[u] * inv;
      vp_sh[e] = v;
      if (writer) v_cache_out[ring_row + e] = v;
      continue;
    }
    const float a = px[u] * inv * w[u], b = prep_sh[r * kD + e2] * inv * w2[u];
    float s, c;
    precise float angle = float(rope_pos) * f[u];  // rounded in f32 like the reference
    rope_sincos(angle, s, c);
    const float rotated = e < half_d ? a * c - b * s : a * c + b * s;
    if (r < kHeads) {
      q_sh[i] = rotated;
      if (q_writer) q_out[(h0 + r) * kD + e] = rotated;
    } else {
      kp_sh[e] = rotated;
      if (writer) k_cache_out[ring_row + e] = kKvMode == INFER_KV_EXACT ? rotated : a;
    }
  }
}

// The own key after the tiles: its score with each head (q_sh · kp_sh summed as above) folded
// into the running max, sum and acc like a one-key tile.
void attend_own_key() {
  const uint lid = gl_LocalInvocationID.x;
  for (uint i = lid; i < kHeads * kD; i += gl_WorkGroupSize.x) prep_sh[i] = q_sh[i] * kp_sh[i % kD];
  barrier();  // also the last tile's m_sh and l_sh
  prep_chunk_sums(kHeads, false);
  float m_keep = 0.0, l_keep = 0.0;
  [[unroll]] for (uint h = 0; h < kHeads; ++h) {
    const float score = prep_row_sum(h);
    const float m_old = m_sh[h], m_new = max(m_old, score);
    const float alpha = exp(m_old - m_new), weight = exp(score - m_new);
    [[unroll]] for (uint t = 0; t < kDims; ++t) {
      const float v = vp_sh[min(lid + t * gl_WorkGroupSize.x, kD - 1u)];
      acc[h * kDims + t] = acc[h * kDims + t] * alpha + weight * v;
    }
    if (lid == h) {
      m_keep = m_new;
      l_keep = l_sh[h] * alpha + weight;
    }
  }
  barrier();  // every invocation has read m_sh and l_sh
  if (lid < kHeads) {
    m_sh[lid] = m_keep;
    l_sh[lid] = l_keep;
  }
}
