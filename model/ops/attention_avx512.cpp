// AVX-512 attention kernel (same contract as attend_keys_generic, attention_kernels.h): a block of
// keys is scored for every head of the tile in one pass over K, exponentiated by exp16, and summed
// into V in one pass, with 2-4 keys x n_heads dot products and 2 x 16 floats x n_heads outputs
// in registers. Built with -mavx512f; chosen at run time by CPUID. Takes d % 16 == 0.
// GCC 12's avx512fintrin.h trips -Wuninitialized on its own `__Y = __Y` (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <cmath>

#include "model/ops/attention_kernels.h"

namespace infer {
namespace {

// exp of 16 floats: n = round(x·log2 e), r = x − n·ln 2 in two steps (Cody-Waite, so r is exact
// to ~1e-11), e^r = 1 + r + r²·P(r) with Cephes expf's degree-5 P on |r| <= ln2/2 (~1 ulp), then
// scaled by 2^n with scalef, which needs no integer exponent tricks and underflows to 0 cleanly.
// The clamp keeps NaN (max/min return their second operand when one is NaN).
inline __m512 exp16(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
  x = _mm512_min_ps(_mm512_set1_ps(88.8f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 y = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(y, n);
}

// Lane i of the result = the sum of the 16 lanes of v[i]: pairs within 128-bit lanes
// (unpack), then quads (shuffle), then across the four 128-bit lanes (two f32x4 shuffles);
// 45 instructions instead of 16 separate reductions of ~8 each.
inline __m512 hsum16(const __m512* v) {
  __m512 t[8], u[4], w[2];
  for (int i = 0; i < 8; ++i) {
    t[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                         _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  }
  for (int i = 0; i < 4; ++i) {
    u[i] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  for (int i = 0; i < 2; ++i) {
    w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  return _mm512_add_ps(_mm512_shuffle_f32x4(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// Scores of NK keys k, k + stride, ... against the tile's HT query rows -> s[h][i .. i + NK).
// HT·NK accumulators are independent FMA chains; with 16 of them one hsum16 reduces all.
template <int HT, int NK>
inline void score_keys(const float* q, int64_t d, const float* k, int64_t stride,
                       float (*s)[kAttentionBlockKeys], int64_t i) {
  __m512 a[HT * NK];  // a[h·NK + c]: head h with key c
  for (int h = 0; h < HT * NK; ++h) a[h] = _mm512_setzero_ps();
  for (int64_t j = 0; j < d; j += 16) {
    __m512 x[NK];
    for (int c = 0; c < NK; ++c) x[c] = _mm512_loadu_ps(k + c * stride + j);
    for (int h = 0; h < HT; ++h) {
      const __m512 qv = _mm512_loadu_ps(q + h * d + j);
      for (int c = 0; c < NK; ++c) a[h * NK + c] = _mm512_fmadd_ps(qv, x[c], a[h * NK + c]);
    }
  }
  if constexpr (HT * NK == 16) {
    alignas(64) float sums[16];
    _mm512_store_ps(sums, hsum16(a));
    for (int h = 0; h < HT; ++h) {
      for (int c = 0; c < NK; ++c) s[h][i + c] = sums[h * NK + c];
    }
  } else {
    for (int h = 0; h < HT; ++h) {
      for (int c = 0; c < NK; ++c) s[h][i + c] = _mm512_reduce_add_ps(a[h * NK + c]);
    }
  }
}

// o[h][j .. j + 16·W) = scale[h]·o[h][..] (0 when fresh) + Σ_i s[h][i]·v_i[..].
template <int HT, int W>
inline void sum_values(const AttentionTile& t, const float* v, int64_t stride, int64_t nb,
                       const float (*s)[kAttentionBlockKeys], const float* scale, bool fresh,
                       int64_t j) {
  __m512 acc[HT][W];
  for (int h = 0; h < HT; ++h) {
    for (int w = 0; w < W; ++w) {
      acc[h][w] = fresh ? _mm512_setzero_ps()
                        : _mm512_mul_ps(_mm512_loadu_ps(t.o + h * t.d + j + 16 * w),
                                        _mm512_set1_ps(scale[h]));
    }
  }
  for (int64_t i = 0; i < nb; ++i) {
    __m512 x[W];
    for (int w = 0; w < W; ++w) x[w] = _mm512_loadu_ps(v + i * stride + j + 16 * w);
    for (int h = 0; h < HT; ++h) {
      const __m512 p = _mm512_set1_ps(s[h][i]);
      for (int w = 0; w < W; ++w) acc[h][w] = _mm512_fmadd_ps(p, x[w], acc[h][w]);
    }
  }
  for (int h = 0; h < HT; ++h) {
    for (int w = 0; w < W; ++w) _mm512_storeu_ps(t.o + h * t.d + j + 16 * w, acc[h][w]);
  }
}

template <int HT>
void attend_tile(const AttentionTile& t, const float* k, const float* v, int64_t n,
                 int64_t stride) {
  const int64_t d = t.d;
  alignas(64) float s[HT][kAttentionBlockKeys];
  for (int64_t b0 = 0; b0 < n; b0 += kAttentionBlockKeys) {
    const int64_t nb = std::min(kAttentionBlockKeys, n - b0);
    const float* kb = k + b0 * stride;
    const float* vb = v + b0 * stride;
    // Keys per pass: 4 for small tiles, whose few chains would otherwise wait on FMA latency.
    constexpr int NK = HT <= 4 ? 4 : 2;
    int64_t i = 0;
    for (; i + NK <= nb; i += NK) score_keys<HT, NK>(t.q, d, kb + i * stride, stride, s, i);
    for (; i < nb; ++i) score_keys<HT, 1>(t.q, d, kb + i * stride, stride, s, i);
    const int64_t nb16 = (nb + 15) & ~int64_t(15);

    // Online softmax: new max, rescale of the old sum (and below of o), p = exp(s − m) in place.
    const bool fresh = t.m[0] == -INFINITY;  // every head of a tile has seen the same keys
    float scale[HT];
    for (int h = 0; h < HT; ++h) {
      for (int64_t c = nb; c < nb16; ++c) s[h][c] = -INFINITY;
      __m512 mx = _mm512_set1_ps(-INFINITY);
      for (int64_t c = 0; c < nb16; c += 16) mx = _mm512_max_ps(mx, _mm512_load_ps(&s[h][c]));
      const float m_new = std::max(t.m[h], _mm512_reduce_max_ps(mx));
      scale[h] = fresh ? 0.0f : std::exp(t.m[h] - m_new);
      const __m512 mv = _mm512_set1_ps(m_new);
      __m512 sum = _mm512_setzero_ps();
      for (int64_t c = 0; c < nb16; c += 16) {
        const __m512 p = exp16(_mm512_sub_ps(_mm512_load_ps(&s[h][c]), mv));
        _mm512_store_ps(&s[h][c], p);
        sum = _mm512_add_ps(sum, p);
      }
      t.l[h] = t.l[h] * scale[h] + _mm512_reduce_add_ps(sum);
      t.m[h] = m_new;
    }

    // Output vectors per pass: 4 for 1-2 heads, so that 8 FMA chains are in flight.
    constexpr int W = HT <= 2 ? 4 : 2;
    int64_t j = 0;
    for (; j + 16 * W <= d; j += 16 * W) sum_values<HT, W>(t, vb, stride, nb, s, scale, fresh, j);
    for (; j + 32 <= d; j += 32) sum_values<HT, 2>(t, vb, stride, nb, s, scale, fresh, j);
    if (j < d) sum_values<HT, 1>(t, vb, stride, nb, s, scale, fresh, j);
  }
}

}  // namespace

void attend_keys_avx512(const AttentionTile& tile, const float* k, const float* v, int64_t n,
                        int64_t stride) {
  switch (tile.n_heads) {
    case 1:
      return attend_tile<1>(tile, k, v, n, stride);
    case 2:
      return attend_tile<2>(tile, k, v, n, stride);
    case 3:
      return attend_tile<3>(tile, k, v, n, stride);
    case 4:
      return attend_tile<4>(tile, k, v, n, stride);
    case 5:
      return attend_tile<5>(tile, k, v, n, stride);
    case 6:
      return attend_tile<6>(tile, k, v, n, stride);
    case 7:
      return attend_tile<7>(tile, k, v, n, stride);
    default:
      return attend_tile<8>(tile, k, v, n, stride);
  }
}

void exp_avx512(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, exp16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, exp16(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

}  // namespace infer
