// attention_key_mass: scores recomputed per (token, head) after attention (the fused kernels never
// materialise probabilities); only `--evict mass` pays for it, on full layers.
#include "model/ops/attention_mass.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace infer {
namespace {

// Eight partial sums let the compiler vectorise without reassociating one accumulator.
float dot(const float* a, const float* b, int64_t d) {
  float acc[8] = {};
  int64_t j = 0;
  for (; j + 8 <= d; j += 8) {
    for (int u = 0; u < 8; ++u) acc[u] += a[j + u] * b[j + u];
  }
  for (; j < d; ++j) acc[0] += a[j] * b[j];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace

void attention_key_mass(const float* q, const AttentionShape& s, const KvView& kv,
                        int64_t n_cache, float* scores, float* mass) {
  INFER_CHECK(s.window == 0 && kv.cache_begin == 0 && n_cache <= s.pos0,
              "mass: window %lld, cache_begin %lld, n_cache %lld, pos0 %lld", (long long)s.window,
              (long long)kv.cache_begin, (long long)n_cache, (long long)s.pos0);
  const int64_t d = s.d, row = s.n_kv * s.d, group = s.n_q / s.n_kv;
  for (int64_t t = 0; t < s.T; ++t) {
    const int64_t n = s.pos0 + t + 1;  // keys [0, pos0) cached, then chunk [pos0, pos0 + t]
    for (int64_t h = 0; h < s.n_q; ++h) {
      const float* qh = q + (t * s.n_q + h) * d;
      const int64_t head = (h / group) * d;
      float mx = -INFINITY;
      for (int64_t i = 0; i < n; ++i) {
        const float* k = i < s.pos0 ? kv.cache_k + (i % kv.slots) * row + head
                                    : kv.chunk_k + (i - s.pos0) * row + head;
        scores[i] = dot(qh, k, d);
        mx = std::max(mx, scores[i]);
      }
      float sum = 0.0f;
      for (int64_t i = 0; i < n; ++i) sum += (scores[i] = std::exp(scores[i] - mx));
      const float inv = 1.0f / sum;
      for (int64_t i = 0; i < n_cache; ++i) mass[i] += scores[i] * inv;
    }
  }
}

}  // namespace infer
