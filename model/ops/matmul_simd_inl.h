// The SIMD matmul kernels, written once over a vector-traits type S (matmul_avx512.cpp,
// matmul_avx2.cpp). Include inside an anonymous namespace after the intrinsics headers: each TU
// gets its own copies, compiled with its own flags (no ODR mixing of ISAs). Uses no std templates
// for the same reason.
//
// S provides: V, kW (lanes), kMT x kMR (prefill micro-tile), zero, set1, load, load_partial
// (zero-filled), store, fma, mul, add, half (one fp16), bf16/bf16_partial (kW bf16 -> f32),
// scales (the fp16 scales of n <= kW blocks `stride` bytes apart -> f32, the rest zero), i8 (kW
// int8 -> f32), q4 (16 bytes -> 32 weights minus 8, in 32/kW vectors), q8_dot/q4_dot (acc[0..1]
// += d · (q · x) for one block; q4_dot also takes q4_x of the block's x, computed once for all
// rows), reduce (one sum), reduce4 (four sums).

// T = 1 (decode) reads each weight once: stream kNR rows at a time so several rows are in flight.
constexpr int kNR = 4;
// Prefetch distance in rows (two groups ahead).
constexpr int64_t kPrefetchRows = 2 * kNR;
// T >= kTileMinT (prefill) dequantizes a kRB x kKC block of weights into an f32 tile on the stack
// (L1) and multiplies it with MT x MR blocks of tokens x rows, so each weight load serves T tokens.
constexpr int64_t kTileMinT = 3;
constexpr int64_t kRB = 16;
constexpr int64_t kKC = 512;

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

template <class S, int NR>
void gemv_f32(const Matrix& w, const float* x, float* y, int64_t r) {
  using V = typename S::V;
  const int64_t n = w.cols, full = n / S::kW * S::kW;
  const float* p[NR];
  V acc[NR];
  for (int i = 0; i < NR; ++i) {
    p[i] = reinterpret_cast<const float*>(w.row(r + i));
    acc[i] = S::zero();
  }
  const int64_t ahead = int64_t(w.stride()) * kPrefetchRows;
  for (int64_t c = 0; c < full; c += S::kW) {
    const V xv = S::load(x + c);
    for (int i = 0; i < NR; ++i) {
      if (c % 16 == 0) {  // one prefetch per 64-byte line
        __builtin_prefetch(reinterpret_cast<const char*>(p[i] + c) + ahead);
      }
      acc[i] = S::fma(S::load(p[i] + c), xv, acc[i]);
    }
  }
  if (full < n) {
    const int m = int(n - full);
    const V xv = S::load_partial(x + full, m);
    for (int i = 0; i < NR; ++i) acc[i] = S::fma(S::load_partial(p[i] + full, m), xv, acc[i]);
  }
  for (int i = 0; i < NR; ++i) y[r + i] = S::reduce(acc[i]);
}

template <class S, int NR>
void gemv_bf16(const Matrix& w, const float* x, float* y, int64_t r) {
  using V = typename S::V;
  const int64_t n = w.cols, full = n / S::kW * S::kW;
  const uint16_t* p[NR];
  V acc[NR];
  for (int i = 0; i < NR; ++i) {
    p[i] = reinterpret_cast<const uint16_t*>(w.row(r + i));
    acc[i] = S::zero();
  }
  const int64_t ahead = int64_t(w.stride()) * kPrefetchRows;
  for (int64_t c = 0; c < full; c += S::kW) {
    const V xv = S::load(x + c);
    for (int i = 0; i < NR; ++i) {
      if (c % 32 == 0) {  // one prefetch per 64-byte line
        __builtin_prefetch(reinterpret_cast<const char*>(p[i] + c) + ahead);
      }
      acc[i] = S::fma(S::bf16(p[i] + c), xv, acc[i]);
    }
  }
  if (full < n) {
    const int m = int(n - full);
    const V xv = S::load_partial(x + full, m);
    for (int i = 0; i < NR; ++i) acc[i] = S::fma(S::bf16_partial(p[i] + full, m), xv, acc[i]);
  }
  for (int i = 0; i < NR; ++i) y[r + i] = S::reduce(acc[i]);
}

// Block scales of NR rows, blocks [b0, b0 + nb), as f32, so the main loop reads each scale with a
// plain broadcast load. S::scales gathers kW of them straight into a register: 16-bit stores
// reloaded as one vector would stall on store forwarding.
constexpr int64_t kScaleChunk = 64;  // blocks per chunk: 2048 weights of each row

template <class S, int NR, class Block>
void convert_scales(const Block* const* p, int64_t b0, int64_t nb, float (*ds)[kScaleChunk]) {
  for (int i = 0; i < NR; ++i) {
    for (int64_t b = 0; b < nb; b += S::kW) {
      const int n = int(min64(S::kW, nb - b));
      S::store(ds[i] + b, S::scales(reinterpret_cast<const uint8_t*>(p[i] + b0 + b),
                                    int(sizeof(Block)), n));
    }
  }
}

// Q8_0/Q4_0 rows: per block and row, acc += d · (q · x) (S::q8_dot, S::q4_dot). The next groups
// of rows are prefetched (rows are short, too short for the hardware prefetcher to ramp up).
template <class S, int NR, class Block>
void gemv_quant(const Matrix& w, const float* x, float* y, int64_t r) {
  using V = typename S::V;
  constexpr int kNV = kQK / S::kW;
  const Block* p[NR];
  V acc[NR][2];  // two chains a row, so FMA latency does not bound a row
  for (int i = 0; i < NR; ++i) {
    p[i] = reinterpret_cast<const Block*>(w.row(r + i));
    acc[i][0] = acc[i][1] = S::zero();
  }
  const int64_t ahead = int64_t(w.stride()) * kPrefetchRows;
  alignas(64) float ds[NR][kScaleChunk];
  const int64_t nblocks = w.cols / kQK;
  for (int64_t b0 = 0; b0 < nblocks; b0 += kScaleChunk) {
    const int64_t nb = min64(kScaleChunk, nblocks - b0);
    convert_scales<S, NR>(p, b0, nb, ds);
    for (int64_t b = 0; b < nb; ++b) {
      V xv[kNV];
      for (int v = 0; v < kNV; ++v) xv[v] = S::load(x + (b0 + b) * kQK + v * S::kW);
      const V xq4 = S::q4_x(xv);  // per block, shared by the NR rows
      for (int i = 0; i < NR; ++i) {
        const Block* blk = p[i] + b0 + b;
        // About one prefetch per 64-byte line: every block of Q8_0 (34 B), every other of Q4_0.
        if (sizeof(Block) > 32 || b % 2 == 0) {
          __builtin_prefetch(reinterpret_cast<const char*>(blk) + ahead);
        }
        if constexpr (sizeof(Block) == sizeof(BlockQ8_0)) {
          S::q8_dot(blk->qs, ds[i][b], xv, acc[i]);
        } else {
          S::q4_dot(blk->qs, ds[i][b], xv, xq4, acc[i]);
        }
      }
    }
  }
  for (int i = 0; i < NR; ++i) y[r + i] = S::reduce(S::add(acc[i][0], acc[i][1]));
}

template <class S, int NR>
void gemv_block(const Matrix& w, const float* x, float* y, int64_t r) {
  switch (w.format) {
    case WeightFormat::kF32:
      return gemv_f32<S, NR>(w, x, y, r);
    case WeightFormat::kBF16:
      return gemv_bf16<S, NR>(w, x, y, r);
    case WeightFormat::kQ8_0:
      return gemv_quant<S, NR, BlockQ8_0>(w, x, y, r);
    case WeightFormat::kQ4_0:
      return gemv_quant<S, NR, BlockQ4_0>(w, x, y, r);
  }
}

// x: [w.cols], y: [w.rows]; rows [r0, r1).
template <class S>
void gemv(const Matrix& w, const float* x, float* y, int64_t r0, int64_t r1) {
  int64_t r = r0;
  for (; r + kNR <= r1; r += kNR) gemv_block<S, kNR>(w, x, y, r);
  for (; r < r1; ++r) gemv_block<S, 1>(w, x, y, r);
}

// dst: [round_up(kc, kW)] f32 <- weights [kb, kb + kc) of row r, zero-padded to whole vectors
// (the tile kernel reads them against zero-filled x lanes; garbage could be NaN).
template <class S>
void dequant_tile_row(const Matrix& w, int64_t r, int64_t kb, int64_t kc, float* dst) {
  const uint8_t* row = w.row(r);
  const int64_t full = kc / S::kW * S::kW;
  switch (w.format) {
    case WeightFormat::kF32: {
      const float* p = reinterpret_cast<const float*>(row) + kb;
      for (int64_t c = 0; c < full; c += S::kW) S::store(dst + c, S::load(p + c));
      if (full < kc) S::store(dst + full, S::load_partial(p + full, int(kc - full)));
      return;
    }
    case WeightFormat::kBF16: {
      const uint16_t* p = reinterpret_cast<const uint16_t*>(row) + kb;
      for (int64_t c = 0; c < full; c += S::kW) S::store(dst + c, S::bf16(p + c));
      if (full < kc) S::store(dst + full, S::bf16_partial(p + full, int(kc - full)));
      return;
    }
    case WeightFormat::kQ8_0: {
      const BlockQ8_0* p = reinterpret_cast<const BlockQ8_0*>(row) + kb / kQK;
      for (int64_t b = 0; b < kc / kQK; ++b) {
        const typename S::V d = S::set1(S::half(p[b].d));
        for (int v = 0; v < kQK / S::kW; ++v) {
          S::store(dst + b * kQK + v * S::kW, S::mul(S::i8(p[b].qs + v * S::kW), d));
        }
      }
      return;
    }
    case WeightFormat::kQ4_0: {
      const BlockQ4_0* p = reinterpret_cast<const BlockQ4_0*>(row) + kb / kQK;
      for (int64_t b = 0; b < kc / kQK; ++b) {
        const typename S::V d = S::set1(S::half(p[b].d));
        typename S::V q[kQK / S::kW];
        S::q4(p[b].qs, q);
        for (int v = 0; v < kQK / S::kW; ++v) S::store(dst + b * kQK + v * S::kW, S::mul(q[v], d));
      }
      return;
    }
  }
}

// y[t][i] (+)= sum_k wt[i][k] · x[t][k] for t < MT, i < MR, k < kc. x rows at stride ldx, tile
// rows at stride kKC (zero-padded past kc), y rows at stride ldy.
template <class S, int MT, int MR>
void tile_kernel(const float* x, int64_t ldx, const float* wt, int64_t kc, float* y, int64_t ldy,
                 bool accumulate) {
  using V = typename S::V;
  V acc[MT][MR];
  for (int t = 0; t < MT; ++t)
    for (int i = 0; i < MR; ++i) acc[t][i] = S::zero();
  const int64_t full = kc / S::kW * S::kW;
  for (int64_t k = 0; k < full; k += S::kW) {
    V wv[MR];
    for (int i = 0; i < MR; ++i) wv[i] = S::load(wt + i * kKC + k);
    for (int t = 0; t < MT; ++t) {
      const V xv = S::load(x + t * ldx + k);
      for (int i = 0; i < MR; ++i) acc[t][i] = S::fma(wv[i], xv, acc[t][i]);
    }
  }
  if (full < kc) {
    V wv[MR];
    for (int i = 0; i < MR; ++i) wv[i] = S::load(wt + i * kKC + full);
    for (int t = 0; t < MT; ++t) {
      const V xv = S::load_partial(x + t * ldx + full, int(kc - full));
      for (int i = 0; i < MR; ++i) acc[t][i] = S::fma(wv[i], xv, acc[t][i]);
    }
  }
  for (int t = 0; t < MT; ++t) {
    float s[MR];
    if constexpr (MR == 4) {
      S::reduce4(acc[t], s);
    } else {
      for (int i = 0; i < MR; ++i) s[i] = S::reduce(acc[t][i]);
    }
    float* yt = y + t * ldy;
    for (int i = 0; i < MR; ++i) yt[i] = accumulate ? yt[i] + s[i] : s[i];
  }
}

// tile_kernel<mt, mr> for the ragged edges, every size up to MT x MR instantiated.
template <class S, int MT, int MR>
void tile_dispatch(int mt, int mr, const float* x, int64_t ldx, const float* wt, int64_t kc,
                   float* y, int64_t ldy, bool accumulate) {
  if constexpr (MT > 1) {
    if (mt < MT) return tile_dispatch<S, MT - 1, MR>(mt, mr, x, ldx, wt, kc, y, ldy, accumulate);
  }
  if constexpr (MR > 1) {
    if (mr < MR) return tile_dispatch<S, MT, MR - 1>(mt, mr, x, ldx, wt, kc, y, ldy, accumulate);
  }
  tile_kernel<S, MT, MR>(x, ldx, wt, kc, y, ldy, accumulate);
}

template <class S>
void tiled(const Matrix& w, const float* x, int64_t T, float* y, int64_t r0, int64_t r1) {
  alignas(64) float tile[kRB * kKC];
  const int64_t cols = w.cols, rows = w.rows;
  for (int64_t rb = r0; rb < r1; rb += kRB) {
    const int64_t nr = min64(kRB, r1 - rb);
    for (int64_t kb = 0; kb < cols; kb += kKC) {
      const int64_t kc = min64(kKC, cols - kb);
      for (int64_t i = 0; i < nr; ++i) dequant_tile_row<S>(w, rb + i, kb, kc, tile + i * kKC);
      for (int64_t tb = 0; tb < T; tb += S::kMT) {
        const int mt = int(min64(S::kMT, T - tb));
        for (int64_t rr = 0; rr < nr; rr += S::kMR) {
          const int mr = int(min64(S::kMR, nr - rr));
          tile_dispatch<S, S::kMT, S::kMR>(mt, mr, x + tb * cols + kb, cols, tile + rr * kKC, kc,
                                           y + tb * rows + rb + rr, rows, kb > 0);
        }
      }
    }
  }
}

template <class S>
void matmul_rows_simd(const Matrix& w, const float* x, int64_t T, float* y, int64_t r0,
                      int64_t r1) {
  if (T < kTileMinT) {
    for (int64_t t = 0; t < T; ++t) gemv<S>(w, x + t * w.cols, y + t * w.rows, r0, r1);
    return;
  }
  tiled<S>(w, x, T, y, r0, r1);
}
