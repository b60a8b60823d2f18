// gelu_mul and softcap (vectorised exp) against the scalar tanh formulas, aliasing and tails.
#include "model/ops/gelu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace infer {
namespace {

std::vector<float> sweep(float lo, float hi, int n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = lo + (hi - lo) * float(i) / float(n - 1);
  return v;
}

TEST(Gelu, GatedProductMatchesTheTanhFormula) {
  const std::vector<float> z = sweep(-40.0f, 40.0f, 100003);  // odd length: a ragged tail
  std::vector<float> up(z.size());
  for (size_t i = 0; i < up.size(); ++i) up[i] = 0.5f + float(i % 7) * 0.25f;
  std::vector<float> out(z.size());
  gelu_mul(z.data(), up.data(), int64_t(z.size()), out.data());
  for (size_t i = 0; i < z.size(); ++i) {
    // The formula in double: in float, 1 + tanh(u) rounds to 0 below z ≈ -5 where the sigmoid
    // form keeps the small true value, so the bound is relative to the terms, |z · up|.
    const double zd = z[i];
    const double u = 0.7978845608028654 * (zd + 0.044715 * zd * zd * zd);
    const double want = 0.5 * zd * (1.0 + std::tanh(u)) * up[i];
    ASSERT_NEAR(out[i], want, 1e-6 * std::abs(zd * up[i]) + 1e-30) << "z " << z[i];
  }
  // In place over the gate, and over up.
  std::vector<float> g = z;
  gelu_mul(g.data(), up.data(), int64_t(g.size()), g.data());
  EXPECT_EQ(g, out);
  std::vector<float> u = up;
  gelu_mul(z.data(), u.data(), int64_t(u.size()), u.data());
  EXPECT_EQ(u, out);
}

TEST(Gelu, GatedProductOfExtremesIsFinite) {
  const float big = std::numeric_limits<float>::max();
  const std::vector<float> z = {-big, -1e4f, -88.0f, 0.0f, -0.0f, 88.0f, 1e4f, big};
  const std::vector<float> up(z.size(), 1.0f);
  std::vector<float> out(z.size());
  gelu_mul(z.data(), up.data(), int64_t(z.size()), out.data());
  for (size_t i = 0; i < z.size(); ++i) {
    if (std::isfinite(gelu_tanh(z[i]))) {
      EXPECT_FLOAT_EQ(out[i], gelu_tanh(z[i])) << z[i];
    }
  }
  EXPECT_TRUE(std::isnan(out[0]) || out[0] == 0.0f);  // -max: z³ overflows, as in the formula
  const float nan = std::numeric_limits<float>::quiet_NaN();
  gelu_mul(&nan, up.data(), 1, out.data());
  EXPECT_TRUE(std::isnan(out[0]));
}

TEST(Gelu, SoftcapMatchesTanhWithinAnAbsoluteBound) {
  for (float cap : {30.0f, 1.0f}) {
    std::vector<float> y = sweep(-50.0f * cap, 50.0f * cap, 70001);
    y.push_back(0.0f);
    y.push_back(-0.0f);
    y.push_back(1e-30f);
    const std::vector<float> x = y;
    softcap(y.data(), int64_t(y.size()), cap);
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = std::tanh(double(x[i]) / cap) * cap;
      ASSERT_NEAR(y[i], want, 1e-6 * cap) << "x " << x[i] << " cap " << cap;
      ASSERT_EQ(std::signbit(y[i]), std::signbit(x[i])) << x[i];
    }
  }
}

}  // namespace
}  // namespace infer
