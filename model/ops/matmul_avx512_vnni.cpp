// AVX512-VNNI matmul for Q8_0/Q4_0 weights, as GGML's vec_dot: each token row of x is quantized
// to Q8_0 once per call, each block's dot product is taken in integers with VPDPBUSD (u8 × s8 ->
// s32) and scaled by d_w · d_x in f32. Other formats run the AVX-512 f32 kernels. Built with
// matmul_avx512.cpp's flags plus -mavx512vnni -mavx512vbmi; only called when CPUID reports them.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

#include "base/check.h"
#include "base/half.h"
#include "model/matrix.h"
#include "model/ops/matmul_kernels.h"
#include "model/quant.h"

namespace infer {
namespace {

// The quantized x of one token is a run of groups, each the weights one VPDPBUSD pass covers and
// laid out to match the weight bytes the kernel shuffles into a zmm:
//   Q4_0 (4 blocks, 256 bytes): [64 x bytes lo][64 x bytes hi][16 i32 off][16 f32 d_x]. Lane 4k+j
//     of a zmm is block k's bytes 4j..4j+3 (lo: x[4j..], hi: x[16 + 4j..], the weights in the low
//     and high nibbles); off = -8 · the lane's 8 x values (the nibbles' offset, taken out in the
//     accumulator's start value); d_x repeated over block k's 4 lanes.
//   Q8_0 (2 blocks, 128 bytes): [64 x bytes, blocks in order][16 f32 d_x, 8 lanes a block].
// Blocks past the row's end are zero (their weights are masked to zero, their scales are zero).
constexpr int64_t kQ4GroupBlocks = 4, kQ4GroupBytes = 256;
constexpr int64_t kQ8GroupBlocks = 2, kQ8GroupBytes = 128;
// Per-thread buffer for the quantized rows (thread-local, so matmul_rows needs no scratch
// argument and decode allocates nothing); T is taken in chunks of as many tokens as fit.
constexpr int64_t kXqBytes = 256 * 1024;

constexpr int kNR = 4;                   // rows a tile (decode streams 4 rows at once)
constexpr int kMT = 4;                   // tokens a tile (prefill reuses each weight 4 times)
constexpr int64_t kPrefetchRows = 2 * kNR;
constexpr int64_t kScaleChunk = 64;      // blocks whose weight scales are converted at once

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// roundf (half away from zero) of each lane, exactly: trunc, then step out where |frac| >= 0.5.
__m512 round_away(__m512 v) {
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __mmask16 up =
      _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(v, t)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN));
  const __m512 one = _mm512_castsi512_ps(_mm512_or_si512(sign, _mm512_set1_epi32(0x3f800000)));
  return _mm512_mask_add_ps(t, up, t, one);
}

// x: [cols] f32 -> one token's groups at dst. The values are quantize_row_q8_0's (model/quant.h):
// d = amax / 127 rounded to fp16, q = roundf(x / d) with the unrounded d.
void quantize_x(const float* x, int64_t cols, bool q4, uint8_t* dst) {
  const int64_t nb = cols / kQK;
  const int64_t gb = q4 ? kQ4GroupBlocks : kQ8GroupBlocks;
  const int64_t group_bytes = q4 ? kQ4GroupBytes : kQ8GroupBytes;
  if (nb % gb != 0) {
    uint8_t* last = dst + nb / gb * group_bytes;
    for (int64_t i = 0; i < group_bytes; i += 64) _mm512_store_si512(last + i, _mm512_setzero_si512());
  }
  for (int64_t b = 0; b < nb; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + b * kQK), v1 = _mm512_loadu_ps(x + b * kQK + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.0f;
    const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    const __m128i q0 = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(round_away(_mm512_mul_ps(v0, id))));
    const __m128i q1 = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(round_away(_mm512_mul_ps(v1, id))));
    const float dx = fp16_to_f32(f32_to_fp16(d));
    uint8_t* g = dst + b / gb * group_bytes;
    const int64_t k = b % gb;
    if (q4) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(g + 16 * k), q0);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(g + 64 + 16 * k), q1);
      const __m128i eight = _mm_set1_epi8(8);
      const __m128i s8 = _mm_dpbusd_epi32(_mm_dpbusd_epi32(_mm_setzero_si128(), eight, q0), eight, q1);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(g + 128 + 16 * k),
                       _mm_sub_epi32(_mm_setzero_si128(), s8));
      _mm_storeu_ps(reinterpret_cast<float*>(g + 192) + 4 * k, _mm_set1_ps(dx));
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(g + 32 * k), q0);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(g + 32 * k + 16), q1);
      _mm256_storeu_ps(reinterpret_cast<float*>(g + 64) + 8 * k, _mm256_set1_ps(dx));
    }
  }
}

// The fp16 scales of NR rows' blocks [b0, b0 + nb) -> f32 in ds (zero past nb, up to a multiple
// of 16): one gather of each block's first 4 bytes per 16 blocks.
template <int NR>
void convert_scales(const uint8_t* const* p, int64_t block_bytes, int64_t b0, int64_t nb,
                    float (*ds)[kScaleChunk]) {
  const __m512i idx = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
      _mm512_set1_epi32(int32_t(block_bytes)));
  for (int i = 0; i < NR; ++i) {
    for (int64_t b = 0; b < nb; b += 16) {
      const int n = int(min64(16, nb - b));
      const __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), __mmask16((1u << n) - 1),
                                                    idx, p[i] + (b0 + b) * block_bytes, 1);
      _mm512_store_ps(ds[i] + b, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g)));
    }
  }
}

// Byte 16k + j <- Q4_0 block k's qs[j] from the 72 bytes of 4 blocks, loaded as a = bytes
// [0, 64) and b = bytes [8, 72) (both inside the 4 blocks: no read past a row).
__m512i q4_index() {
  alignas(64) uint8_t idx[64];
  for (int k = 0; k < 4; ++k) {
    for (int j = 0; j < 16; ++j) {
      const int o = 18 * k + 2 + j;
      idx[16 * k + j] = uint8_t(o < 64 ? o : 64 + o - 8);
    }
  }
  return _mm512_load_si512(idx);
}

// Byte 32k + j <- Q8_0 block k's qs[j] from 2 blocks loaded as a = bytes [0, 64), b = [4, 68).
__m512i q8_index() {
  alignas(64) uint8_t idx[64];
  for (int i = 0; i < 64; ++i) idx[i] = uint8_t(i < 32 ? 2 + i : 64 + i);
  return _mm512_load_si512(idx);
}

// y[t · ldy + i] = row r + i of w · token t, for t < MT, i < NR. xq: MT tokens' groups,
// x_stride bytes apart. Every (row, token) sum runs the same lanes in the same order whatever
// the tile, so any row split and any T give the same bits.
template <int MT, int NR, bool Q4>
void tile(const Matrix& w, int64_t r, const uint8_t* xq, int64_t x_stride, float* y, int64_t ldy) {
  constexpr int64_t kBlockBytes = Q4 ? int64_t(sizeof(BlockQ4_0)) : int64_t(sizeof(BlockQ8_0));
  constexpr int64_t kGroupBlocks = Q4 ? kQ4GroupBlocks : kQ8GroupBlocks;
  constexpr int64_t kGroupBytes = Q4 ? kQ4GroupBytes : kQ8GroupBytes;
  const int64_t nb = w.cols / kQK;
  const uint8_t* p[NR];
  __m512 acc[MT][NR];
  for (int i = 0; i < NR; ++i) {
    p[i] = w.row(r + i);
    for (int t = 0; t < MT; ++t) acc[t][i] = _mm512_setzero_ps();
  }
  const int64_t ahead = int64_t(w.stride()) * kPrefetchRows;
  const __m512i idx = Q4 ? q4_index() : q8_index();
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  // Block k's scale over its lanes: 4 lanes a block for Q4_0, 8 for Q8_0.
  const __m512i expand = Q4 ? _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3)
                            : _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  alignas(64) float ds[NR][kScaleChunk];
  for (int64_t b0 = 0; b0 < nb; b0 += kScaleChunk) {
    const int64_t nbc = min64(kScaleChunk, nb - b0);
    convert_scales<NR>(p, kBlockBytes, b0, nbc, ds);
    for (int64_t b = 0; b < nbc; b += kGroupBlocks) {
      const int64_t n = min64(kGroupBlocks, nb - b0 - b);  // blocks in this group
      const uint8_t* xg = xq + (b0 + b) / kGroupBlocks * kGroupBytes;
      for (int i = 0; i < NR; ++i) {
        const uint8_t* blk = p[i] + (b0 + b) * kBlockBytes;
        __builtin_prefetch(blk + ahead);
        __builtin_prefetch(blk + ahead + 63);
        __m512i lo, hi;
        if (n == kGroupBlocks) {
          lo = _mm512_loadu_si512(blk);
          hi = _mm512_loadu_si512(blk + (Q4 ? 8 : 4));
        } else {  // the row's last, partial group: read only its blocks
          lo = _mm512_maskz_loadu_epi8((__mmask64(1) << (n * kBlockBytes)) - 1, blk);
          hi = _mm512_setzero_si512();
        }
        const __m512i v = _mm512_permutex2var_epi8(lo, idx, hi);
        // The group's 4 (Q4_0) or 2 (Q8_0) weight scales, each over its block's lanes.
        const __m128 d4 = Q4 ? _mm_load_ps(ds[i] + b)
                             : _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(ds[i] + b)));
        const __m512 dw = _mm512_permutexvar_ps(expand, _mm512_castps128_ps512(d4));
        if constexpr (Q4) {
          const __m512i wl = _mm512_and_si512(v, nibble);
          const __m512i wh = _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble);
          for (int t = 0; t < MT; ++t) {
            const uint8_t* xt = xg + t * x_stride;
            __m512i s = _mm512_load_si512(xt + 128);
            s = _mm512_dpbusd_epi32(s, wl, _mm512_load_si512(xt));
            s = _mm512_dpbusd_epi32(s, wh, _mm512_load_si512(xt + 64));
            const __m512 f =
                _mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_load_ps(reinterpret_cast<const float*>(xt + 192)));
            acc[t][i] = _mm512_fmadd_ps(f, dw, acc[t][i]);
          }
        } else {
          // Sign trick: |w| as the u8 side, sign(w) · x as the s8 side.
          const __m512i wa = _mm512_abs_epi8(v);
          const __mmask64 neg = _mm512_movepi8_mask(v);
          for (int t = 0; t < MT; ++t) {
            const uint8_t* xt = xg + t * x_stride;
            const __m512i xv = _mm512_load_si512(xt);
            const __m512i sx = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);
            const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wa, sx);
            const __m512 f =
                _mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_load_ps(reinterpret_cast<const float*>(xt + 64)));
            acc[t][i] = _mm512_fmadd_ps(f, dw, acc[t][i]);
          }
        }
      }
    }
  }
  for (int t = 0; t < MT; ++t) {
    for (int i = 0; i < NR; ++i) y[t * ldy + i] = _mm512_reduce_add_ps(acc[t][i]);
  }
}

template <int NR, bool Q4>
void tile_mt(int mt, const Matrix& w, int64_t r, const uint8_t* xq, int64_t x_stride, float* y,
             int64_t ldy) {
  switch (mt) {
    case 1:
      return tile<1, NR, Q4>(w, r, xq, x_stride, y, ldy);
    case 2:
      return tile<2, NR, Q4>(w, r, xq, x_stride, y, ldy);
    case 3:
      return tile<3, NR, Q4>(w, r, xq, x_stride, y, ldy);
    default:
      return tile<kMT, NR, Q4>(w, r, xq, x_stride, y, ldy);
  }
}

// Rows [r0, r1) for tc tokens whose groups are at xq, x_stride bytes apart.
template <bool Q4>
void quant_rows(const Matrix& w, const uint8_t* xq, int64_t x_stride, int64_t tc, float* y,
                int64_t r0, int64_t r1) {
  const int64_t rows = w.rows;
  // Rows outer: a 4-row group's weights stay in L1 while every token tile passes over them.
  int64_t r = r0;
  for (; r + kNR <= r1; r += kNR) {
    for (int64_t t = 0; t < tc; t += kMT) {
      tile_mt<kNR, Q4>(int(min64(kMT, tc - t)), w, r, xq + t * x_stride, x_stride, y + t * rows + r,
                       rows);
    }
  }
  for (; r < r1; ++r) {
    for (int64_t t = 0; t < tc; t += kMT) {
      tile_mt<1, Q4>(int(min64(kMT, tc - t)), w, r, xq + t * x_stride, x_stride, y + t * rows + r,
                     rows);
    }
  }
}

}  // namespace

void matmul_rows_avx512_vnni(const Matrix& w, const float* x, int64_t T, float* y, int64_t r0,
                             int64_t r1) {
  const bool q4 = w.format == WeightFormat::kQ4_0;
  if (!q4 && w.format != WeightFormat::kQ8_0) return matmul_rows_avx512(w, x, T, y, r0, r1);
  if (r0 >= r1 || T <= 0) return;
  const int64_t cols = w.cols;
  const int64_t gb = q4 ? kQ4GroupBlocks : kQ8GroupBlocks;
  const int64_t group_bytes = q4 ? kQ4GroupBytes : kQ8GroupBytes;
  const int64_t token_bytes = (cols / kQK + gb - 1) / gb * group_bytes;
  INFER_CHECK(token_bytes <= kXqBytes, "matmul: %lld columns exceed the quantized-x buffer",
              (long long)cols);
  alignas(64) static thread_local uint8_t xq[kXqBytes];
  const int64_t chunk = kXqBytes / token_bytes;
  for (int64_t t0 = 0; t0 < T; t0 += chunk) {
    const int64_t tc = min64(chunk, T - t0);
    for (int64_t t = 0; t < tc; ++t) quantize_x(x + (t0 + t) * cols, cols, q4, xq + t * token_bytes);
    float* yt = y + t0 * w.rows;
    if (q4) {
      quant_rows<true>(w, xq, token_bytes, tc, yt, r0, r1);
    } else {
      quant_rows<false>(w, xq, token_bytes, tc, yt, r0, r1);
    }
  }
}

}  // namespace infer
