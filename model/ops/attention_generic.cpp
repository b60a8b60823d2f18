// Portable attention kernel (attention_kernels.h) in plain loops the compiler can vectorise for
// the baseline ISA: the same blocked online softmax as the AVX-512 kernel, and the same exp.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "model/ops/attention_kernels.h"

namespace infer {
namespace {

// q·k over d floats with 16 independent partial sums: one running sum is a long add chain the
// compiler may not reorder (it would change rounding), which makes the loop latency-bound.
inline float dot16(const float* a, const float* b, int64_t d) {
  float acc[16] = {};
  int64_t j = 0;
  for (; j + 16 <= d; j += 16) {
    for (int k = 0; k < 16; ++k) acc[k] += a[j + k] * b[j + k];
  }
  float dot = 0.0f;
  for (; j < d; ++j) dot += a[j] * b[j];
  for (float v : acc) dot += v;
  return dot;
}

// 2^n for integer n in [-126, 127], built from its exponent bits.
inline float pow2i(int32_t n) {
  const uint32_t bits = uint32_t(n + 127) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// exp16's algorithm (attention_avx512.cpp) without FMA or scalef: 2^n as two factors, since n
// reaches −150 and 128 where one float exponent cannot hold it.
inline float exp_poly(float x) {
  if (x != x) return x;
  x = std::min(std::max(x, -104.0f), 88.8f);
  const float t = x * 1.44269504088896341f;
  const int32_t ni = int32_t(t + (t < 0.0f ? -0.5f : 0.5f));
  const float n = float(ni);
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * (r * r) + (r + 1.0f);
  const int32_t half = ni / 2;
  return y * pow2i(half) * pow2i(ni - half);
}

}  // namespace

void exp_generic(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp_poly(x[i]);
}

void attend_keys_generic(const AttentionTile& t, const float* k, const float* v, int64_t n,
                         int64_t stride) {
  const int64_t d = t.d;
  float s[kAttentionTileHeads][kAttentionBlockKeys];
  for (int64_t b0 = 0; b0 < n; b0 += kAttentionBlockKeys) {
    const int64_t nb = std::min(kAttentionBlockKeys, n - b0);
    const float* kb = k + b0 * stride;
    const float* vb = v + b0 * stride;
    for (int64_t i = 0; i < nb; ++i) {
      for (int h = 0; h < t.n_heads; ++h) s[h][i] = dot16(t.q + h * d, kb + i * stride, d);
    }
    const bool fresh = t.m[0] == -INFINITY;  // every head of a tile has seen the same keys
    for (int h = 0; h < t.n_heads; ++h) {
      float* sh = s[h];
      float* oh = t.o + h * d;
      const float m_new = std::max(t.m[h], *std::max_element(sh, sh + nb));
      for (int64_t i = 0; i < nb; ++i) sh[i] -= m_new;
      exp_generic(sh, sh, nb);
      float sum = 0.0f;
      for (int64_t i = 0; i < nb; ++i) sum += sh[i];
      if (fresh) {
        std::fill(oh, oh + d, 0.0f);
        t.l[h] = sum;
      } else {
        const float scale = std::exp(t.m[h] - m_new);
        for (int64_t j = 0; j < d; ++j) oh[j] *= scale;
        t.l[h] = t.l[h] * scale + sum;
      }
      t.m[h] = m_new;
      for (int64_t i = 0; i < nb; ++i) {
        const float w = sh[i];
        const float* vi = vb + i * stride;
        for (int64_t j = 0; j < d; ++j) oh[j] += w * vi[j];
      }
    }
  }
}

}  // namespace infer
