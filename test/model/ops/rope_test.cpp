// rope_tables / rope_apply against the rotation written as complex numbers in double: identity at
// position 0, pairs (j, j + d/2) rotated by pos·inv_freq[j], norms kept, zero-frequency tails
// (proportional RoPE, GEMMA4_TEXT.md §4.6) left alone, and scores that depend only on the offset.
#include "model/ops/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <vector>

namespace infer {
namespace {

std::vector<float> values(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 1u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = float(s >> 8) / float(1 << 24) - 0.5f;
  }
  return v;
}

// Standard inverse frequencies theta^(-2j/d), with the last `zero_tail` set to 0.
std::vector<float> inv_freq(int64_t d, double theta, int64_t zero_tail = 0) {
  std::vector<float> f(static_cast<size_t>(d / 2));
  for (int64_t j = 0; j < d / 2; ++j) f[size_t(j)] = float(std::pow(theta, -2.0 * double(j) / double(d)));
  for (int64_t j = d / 2 - zero_tail; j < d / 2; ++j) f[size_t(j)] = 0.0f;
  return f;
}

// x: [T, heads, d] rotated by the spec's formula: (a + ib) · e^{i·angle}, the angle formed in fp32.
std::vector<float> simple_rope(const std::vector<float>& x, int64_t T, int64_t heads, int64_t d,
                               const std::vector<float>& freq, int64_t pos0) {
  std::vector<float> out = x;
  const int64_t half = d / 2;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t j = 0; j < half; ++j) {
        const size_t base = size_t((t * heads + h) * d);
        const double angle = double(float(pos0 + t) * freq[size_t(j)]);
        const std::complex<double> z(x[base + size_t(j)], x[base + size_t(j + half)]);
        const std::complex<double> r = z * std::polar(1.0, angle);
        out[base + size_t(j)] = float(r.real());
        out[base + size_t(j + half)] = float(r.imag());
      }
    }
  }
  return out;
}

std::vector<float> rotated(std::vector<float> x, int64_t T, int64_t heads, int64_t d,
                           const std::vector<float>& freq, int64_t pos0) {
  std::vector<float> c(static_cast<size_t>(T * d / 2)), s(c.size());
  rope_tables(freq.data(), d / 2, pos0, T, c.data(), s.data());
  rope_apply(x.data(), T, heads, d, c.data(), s.data());
  return x;
}

TEST(Rope, MatchesTheComplexRotation) {
  for (int64_t d : {2, 8, 256, 512}) {
    for (int64_t pos0 : {0, 1, 37, 8191, 131071}) {
      const int64_t T = 3, heads = 2;
      const std::vector<float> freq = inv_freq(d, d == 512 ? 1e6 : 1e4);
      const std::vector<float> x = values(T * heads * d, uint32_t(d + pos0));
      const std::vector<float> got = rotated(x, T, heads, d, freq, pos0);
      const std::vector<float> want = simple_rope(x, T, heads, d, freq, pos0);
      for (size_t i = 0; i < got.size(); ++i) {
        // fp32 cos/sin of the same fp32 angle, two products and a sum: a few ulps of |x|.
        ASSERT_NEAR(got[i], want[i], 2e-6f) << "d " << d << " pos0 " << pos0 << " i " << i;
      }
    }
  }
}

TEST(Rope, PositionZeroIsTheIdentityAndNormsAreKept) {
  const int64_t d = 64, T = 5, heads = 3;
  const std::vector<float> freq = inv_freq(d, 1e4);
  const std::vector<float> x = values(T * heads * d, 3);
  std::vector<float> one = rotated(std::vector<float>(x.begin(), x.begin() + heads * d), 1, heads,
                                   d, freq, 0);
  EXPECT_EQ(one, std::vector<float>(x.begin(), x.begin() + heads * d));
  const std::vector<float> got = rotated(x, T, heads, d, freq, 1000);
  for (int64_t v = 0; v < T * heads; ++v) {
    for (int64_t j = 0; j < d / 2; ++j) {
      const size_t a = size_t(v * d + j), b = a + size_t(d / 2);
      EXPECT_NEAR(std::hypot(got[a], got[b]), std::hypot(x[a], x[b]), 1e-6f);
    }
  }
}

TEST(Rope, ZeroFrequencyTailsAreNotRotated) {
  // Proportional RoPE on full layers rotates only the first partial_rotary_factor of the pairs.
  const int64_t d = 512, tail = 192;
  const std::vector<float> freq = inv_freq(d, 1e6, tail);
  const std::vector<float> x = values(d, 5);
  const std::vector<float> got = rotated(x, 1, 1, d, freq, 12345);
  for (int64_t j = d / 2 - tail; j < d / 2; ++j) {
    EXPECT_EQ(got[size_t(j)], x[size_t(j)]) << j;
    EXPECT_EQ(got[size_t(j + d / 2)], x[size_t(j + d / 2)]) << j;
  }
  // The rotated pairs did move.
  EXPECT_GT(std::abs(got[0] - x[0]) + std::abs(got[size_t(d / 2)] - x[size_t(d / 2)]), 1e-4f);
}

TEST(Rope, ScoresDependOnlyOnTheOffset) {
  // q·k after rotation at positions (m, n) equals the same at (m + s, n + s): what lets the ring
  // assign positions inside the cache.
  const int64_t d = 256;
  const std::vector<float> freq = inv_freq(d, 1e4);
  const std::vector<float> q = values(d, 11), k = values(d, 12);
  auto score = [&](int64_t m, int64_t n) {
    const std::vector<float> qr = rotated(q, 1, 1, d, freq, m), kr = rotated(k, 1, 1, d, freq, n);
    double s = 0;
    for (int64_t i = 0; i < d; ++i) s += double(qr[size_t(i)]) * kr[size_t(i)];
    return s;
  };
  const double base = score(20, 3);
  for (int64_t shift : {1, 7, 100}) EXPECT_NEAR(score(20 + shift, 3 + shift), base, 2e-5) << shift;
  EXPECT_GT(std::abs(score(20, 3) - score(20, 9)), 1e-3);  // a different offset scores differently
}

}  // namespace
}  // namespace infer
