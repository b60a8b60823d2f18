// softmax against exp(z - max) / Σ in double: lengths with ragged tails, a sum of 1, invariance to
// a shift, no overflow at large logits, masked (-inf) entries exactly 0.
#include "model/ops/softmax.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace infer {
namespace {

std::vector<float> values(int64_t n, uint32_t seed, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 1u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = (float(s >> 8) / float(1 << 24) - 0.5f) * scale;
  }
  return v;
}

std::vector<double> simple_softmax(const std::vector<float>& z) {
  double mx = -std::numeric_limits<double>::infinity();
  for (float v : z) mx = std::max(mx, double(v));
  std::vector<double> p(z.size());
  double sum = 0;
  for (size_t i = 0; i < z.size(); ++i) sum += p[i] = std::exp(double(z[i]) - mx);
  for (double& v : p) v /= sum;
  return p;
}

TEST(Softmax, MatchesThePlainFormula) {
  for (int64_t n : {1, 2, 3, 15, 16, 17, 33, 256, 1001, 8192}) {
    for (float scale : {1.0f, 30.0f}) {
      std::vector<float> z = values(n, uint32_t(n), scale);
      const std::vector<float> logits = z;
      const float mx = *std::max_element(logits.begin(), logits.end());
      const std::vector<double> want = simple_softmax(z);
      softmax(z.data(), n);
      double sum = 0;
      for (size_t i = 0; i < z.size(); ++i) {
        // fp32 z - max rounds to 2^-24 of its size, which exp turns into that much relative error
        // per unit of |z - max|; exp and the final scale add a few ulps more.
        const double rel = 1e-6 + 1.2e-7 * std::abs(double(logits[i]) - mx);
        ASSERT_NEAR(z[i], want[i], rel * want[i] + 1e-30) << "n " << n << " i " << i;
        sum += z[i];
      }
      EXPECT_NEAR(sum, 1.0, 1e-5) << "n " << n;
    }
  }
}

TEST(Softmax, IsInvariantToAShiftAndDoesNotOverflow) {
  const std::vector<float> z = values(100, 9, 4.0f);
  std::vector<float> a = z, b = z;
  for (float& v : b) v += 1e4f;  // exp(1e4) overflows fp32: the max must be subtracted first
  softmax(a.data(), 100);
  softmax(b.data(), 100);
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(std::isfinite(b[i]));
    // 1e4 + z rounds z to fp32's spacing at 1e4 (~1e-3): compare with that slack.
    EXPECT_NEAR(b[i], a[i], 2e-3f * a[i] + 1e-7f) << i;
  }
}

TEST(Softmax, MaskedEntriesGetExactlyZero) {
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> z = {0.5f, ninf, 2.0f, ninf, -1.0f};
  softmax(z.data(), int64_t(z.size()));
  EXPECT_EQ(z[1], 0.0f);
  EXPECT_EQ(z[3], 0.0f);
  EXPECT_NEAR(z[0] + z[2] + z[4], 1.0f, 1e-6f);
  std::vector<float> one = {-3.0f};
  softmax(one.data(), 1);
  EXPECT_EQ(one[0], 1.0f);
}

}  // namespace
}  // namespace infer
