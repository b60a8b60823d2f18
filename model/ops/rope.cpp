// RoPE reference. The angle is formed in fp32 as HF does (inv_freq @ position_ids in float32), so
// long positions round the same way the oracle's do.
#include "model/ops/rope.h"

#include <cmath>

namespace infer {

void rope_tables(const float* inv_freq, int64_t half_d, int64_t pos0, int64_t T, float* cos,
                 float* sin) {
  for (int64_t t = 0; t < T; ++t) {
    const float pos = float(pos0 + t);
    for (int64_t j = 0; j < half_d; ++j) {
      const float angle = pos * inv_freq[j];
      cos[t * half_d + j] = std::cos(angle);
      sin[t * half_d + j] = std::sin(angle);
    }
  }
}

void rope_apply(float* x, int64_t T, int64_t n_heads, int64_t d, const float* cos,
                const float* sin) {
  const int64_t half = d / 2;
  for (int64_t t = 0; t < T; ++t) {
    const float* c = cos + t * half;
    const float* s = sin + t * half;
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + (t * n_heads + h) * d;
      for (int64_t j = 0; j < half; ++j) {
        const float a = v[j];
        const float b = v[j + half];
        v[j] = a * c[j] - b * s[j];
        v[j + half] = b * c[j] + a * s[j];
      }
    }
  }
}

}  // namespace infer
