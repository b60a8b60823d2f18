// rms_norm against a plain twin in long double: with and without a weight, every row length up
// to two AVX-512 vectors plus ragged tails, several rows, in place, and the ε that guards zeros.
#include "model/ops/rms_norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace infer {
namespace {

// Deterministic values spanning several orders of magnitude, signs mixed.
std::vector<float> values(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 1u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = (float(s >> 8) / float(1 << 24) - 0.5f) * float(1 + (s & 7) * 3);
  }
  return v;
}

// The spec's formula (GEMMA4_TEXT.md §4.1) in long double: x / sqrt(mean(x²) + ε) · w.
std::vector<float> simple_rms_norm(const std::vector<float>& x, const float* w, int64_t rows,
                                   int64_t n, float eps) {
  std::vector<float> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    long double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += (long double)x[size_t(r * n + i)] * x[size_t(r * n + i)];
    const long double inv = 1.0L / std::sqrt(sum / n + eps);
    for (int64_t i = 0; i < n; ++i) {
      const long double y = x[size_t(r * n + i)] * inv * (w ? w[i] : 1.0f);
      out[size_t(r * n + i)] = float(y);
    }
  }
  return out;
}

TEST(RmsNorm, MatchesThePlainFormulaAtEveryLength) {
  for (int64_t n = 1; n <= 33; ++n) {
    for (int64_t rows : {1, 3}) {
      const std::vector<float> x = values(rows * n, uint32_t(n));
      const std::vector<float> w = values(n, uint32_t(n + 100));
      for (const float* wp : {w.data(), static_cast<const float*>(nullptr)}) {
        std::vector<float> out(x.size());
        rms_norm(x.data(), wp, rows, n, 1e-6f, out.data());
        const std::vector<float> want = simple_rms_norm(x, wp, rows, n, 1e-6f);
        for (size_t i = 0; i < out.size(); ++i) {
          // One fp32 product chain after a correctly rounded scale: a few ulps of the output.
          ASSERT_NEAR(out[i], want[i], 4e-7f * std::abs(want[i]) + 1e-30f)
              << "n " << n << " rows " << rows << " weight " << (wp != nullptr) << " i " << i;
        }
      }
    }
  }
}

TEST(RmsNorm, LongRowsStayWithinRoundingOfTheFormula) {
  // Gemma 4's widths: H 1536-5376 and d 256/512; double accumulation keeps the error per element.
  for (int64_t n : {256, 512, 1536, 3840, 5376}) {
    const std::vector<float> x = values(n, uint32_t(n));
    std::vector<float> out(x.size());
    rms_norm(x.data(), nullptr, 1, n, 1e-6f, out.data());
    const std::vector<float> want = simple_rms_norm(x, nullptr, 1, n, 1e-6f);
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_NEAR(out[i], want[i], 4e-7f * std::abs(want[i]) + 1e-30f) << "n " << n;
    }
    // Unit root mean square: the defining property.
    double sum = 0;
    for (float y : out) sum += double(y) * y;
    EXPECT_NEAR(sum / double(n), 1.0, 1e-5) << "n " << n;
  }
}

TEST(RmsNorm, WorksInPlace) {
  const int64_t rows = 4, n = 19;
  const std::vector<float> x = values(rows * n, 7);
  const std::vector<float> w = values(n, 8);
  std::vector<float> separate(x.size());
  rms_norm(x.data(), w.data(), rows, n, 1e-6f, separate.data());
  std::vector<float> inplace = x;
  rms_norm(inplace.data(), w.data(), rows, n, 1e-6f, inplace.data());
  EXPECT_EQ(inplace, separate);
}

TEST(RmsNorm, EpsilonKeepsAZeroRowFinite) {
  const std::vector<float> x(16, 0.0f);
  std::vector<float> out(16, 1.0f);
  rms_norm(x.data(), nullptr, 1, 16, 1e-6f, out.data());
  for (float y : out) EXPECT_EQ(y, 0.0f);
  // A tiny row is scaled by 1 / sqrt(mean + ε), not blown up to unit size.
  const std::vector<float> tiny(16, 1e-6f);
  rms_norm(tiny.data(), nullptr, 1, 16, 1e-6f, out.data());
  for (float y : out) EXPECT_NEAR(y, 1e-6f / std::sqrt(1e-12f + 1e-6f), 1e-9f);
}

}  // namespace
}  // namespace infer
