// attention_key_mass (model/ops/attention_mass.h) against probabilities computed in double from
// the same scores, on ragged shapes with a chunk of several queries.
#include "model/ops/attention_mass.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <vector>

namespace infer {
namespace {

TEST(AttentionKeyMass, MatchesSoftmaxProbabilitiesSummedOverHeadsAndQueries) {
  for (const auto [n_cache, T, n_q, n_kv, d] :
       {std::array<int64_t, 5>{1, 1, 1, 1, 8}, {37, 5, 4, 2, 19}, {130, 3, 8, 1, 64}}) {
    std::mt19937 rng(uint32_t(n_cache * 31 + d));
    std::normal_distribution<float> dist(0.0f, 0.5f);
    const int64_t row = n_kv * d;
    std::vector<float> k(size_t((n_cache + T) * row)), q(size_t(T * n_q * d));
    for (float& x : k) x = dist(rng);
    for (float& x : q) x = dist(rng);
    AttentionShape s;
    s.T = T;
    s.pos0 = n_cache;
    s.n_q = n_q;
    s.n_kv = n_kv;
    s.d = d;
    KvView kv;
    kv.cache_k = k.data();
    kv.slots = n_cache;
    kv.chunk_k = k.data() + n_cache * row;
    std::vector<float> scores(size_t(n_cache + T)), mass(size_t(n_cache), 0.5f);
    attention_key_mass(q.data(), s, kv, n_cache, scores.data(), mass.data());

    std::vector<double> want(size_t(n_cache), 0.5);  // the op adds to what is there
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < n_q; ++h) {
        const int64_t g = h / (n_q / n_kv), n = n_cache + t + 1;
        std::vector<double> p(static_cast<size_t>(n));
        double mx = -INFINITY, sum = 0;
        for (int64_t i = 0; i < n; ++i) {
          double dot = 0;
          for (int64_t j = 0; j < d; ++j) {
            dot += double(q[size_t((t * n_q + h) * d + j)]) * double(k[size_t(i * row + g * d + j)]);
          }
          p[size_t(i)] = dot;
          mx = std::max(mx, dot);
        }
        for (double& x : p) sum += (x = std::exp(x - mx));
        for (int64_t i = 0; i < n_cache; ++i) want[size_t(i)] += p[size_t(i)] / sum;
      }
    }
    // fp32 scores of O(1) with d <= 64 terms: relative errors ~1e-6 on each probability.
    for (int64_t i = 0; i < n_cache; ++i) {
      EXPECT_NEAR(mass[size_t(i)], want[size_t(i)], 1e-5 * (1 + want[size_t(i)])) << i;
    }
  }
}

}  // namespace
}  // namespace infer
