// GPU element-wise and selection ops (gpu/ops/elementwise.h) vs CPU loops: gated GELU with
// strides and offsets, soft-cap, argmax and top-k with ties over rows up to V = 262144.
#include "gpu/ops/elementwise.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gpu/ops/op_common.h"
#include "model/ops/gelu.h"
#include "model/sampling.h"
#include "test/gpu/gpu_test_env.h"
#include "test/gpu/op_test_buffers.h"

namespace infer::gpu {
namespace {

class GpuElementwise : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (ctx_ == nullptr) return;
    ops_ = ElementwiseOps::create(*ctx_).value();
  }
  std::unique_ptr<ElementwiseOps> ops_;
};

std::vector<float> uniform(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// out[t·n + j] = gelu(a[t·a_stride + a_off + j]) · b[t·b_stride + b_off + j]; a spans the tails
// (|z| up to 12) where tanh saturates.
void check_gelu_mul(const VulkanContext& ctx, const ElementwiseOps& ops, uint32_t T, uint32_t n,
                    uint32_t a_stride, uint32_t a_off, uint32_t b_stride, uint32_t b_off,
                    bool in_place) {
  SCOPED_TRACE("T " + std::to_string(T) + " n " + std::to_string(n) + " a " +
               std::to_string(a_stride) + "+" + std::to_string(a_off) + " b " +
               std::to_string(b_stride) + "+" + std::to_string(b_off) +
               (in_place ? " in place" : ""));
  const std::vector<float> a = uniform(size_t(T - 1) * a_stride + a_off + n, -12.0f, 12.0f, n);
  const std::vector<float> b = uniform(size_t(T - 1) * b_stride + b_off + n, -2.0f, 2.0f, n + 1);
  const Buffer ab = to_device(ctx, a, "a");
  const Buffer bb = to_device(ctx, b, "b");
  const Buffer ob = to_device(ctx, std::vector<float>(size_t(T) * n, NAN), "out");
  const Buffer& out = in_place ? ab : ob;
  auto r = run_recording(ctx, [&](Recorder& rec) {
    return ops.gelu_mul(rec, Binding{&ab}, a_stride, a_off, Binding{&bb}, b_stride, b_off,
                        Binding{&out}, T, n);
  });
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::vector<float> got = from_device<float>(ctx, out, size_t(T) * n);
  // The shader writes 0.5·z·(1 + tanh(u)) as z·sigmoid(2u): equal functions, and f32 rounding
  // apart from 1 + tanh(u) as it nears 0, where the reference's own error is ~|z·b|·ulp(1).
  int bad = 0;
  for (uint32_t t = 0; t < T; ++t) {
    for (uint32_t j = 0; j < n; ++j) {
      const float z = a[size_t(t) * a_stride + a_off + j], y = b[size_t(t) * b_stride + b_off + j];
      const float want = gelu_tanh(z) * y, g = got[size_t(t) * n + j];
      const double tol = 1e-5 * std::fabs(want) + 1e-6 * std::fabs(z * y) + 1e-30;
      if (!(std::fabs(double(g) - want) <= tol) && ++bad <= 5) {
        ADD_FAILURE() << "out[" << t << ", " << j << "] = " << g << ", reference " << want
                      << " (z = " << z << ")";
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST_F(GpuElementwise, GeluMulMatchesCpuReference) {
  for (uint32_t n : {1u, 7u, 33u, 256u, 6144u}) {
    check_gelu_mul(*ctx_, *ops_, 1, n, n, 0, n, 0, false);
    check_gelu_mul(*ctx_, *ops_, 3, n, n, 0, n, 0, false);
  }
}

// The PLE block's shape: a is [T, P], b slice l of ple [T, L·P]; and the other way round.
TEST_F(GpuElementwise, GeluMulReadsStridedSlices) {
  const uint32_t P = 256, L = 5;
  check_gelu_mul(*ctx_, *ops_, 4, P, P, 0, L * P, 3 * P, false);
  check_gelu_mul(*ctx_, *ops_, 4, 33, 100, 7, 33, 0, false);
  check_gelu_mul(*ctx_, *ops_, 1, 33, 100, 67, 40, 7, false);
}

TEST_F(GpuElementwise, GeluMulInPlace) {
  check_gelu_mul(*ctx_, *ops_, 3, 256, 256, 0, 1280, 512, true);
  check_gelu_mul(*ctx_, *ops_, 2, 7, 7, 0, 7, 0, true);
}

// y = tanh(y / cap)·cap against std::tanh: logits from 1e-6 to 1e4 in magnitude, both signs.
void check_softcap(const VulkanContext& ctx, const ElementwiseOps& ops, uint32_t count, float cap) {
  SCOPED_TRACE("count " + std::to_string(count) + " cap " + std::to_string(cap));
  std::vector<float> y = uniform(count, -1.0f, 1.0f, count);
  for (size_t i = 0; i < y.size(); ++i) y[i] *= std::pow(10.0f, float(int(i % 11) - 6));
  if (count > 2) y[1] = 0.0f;
  const Buffer yb = to_device(ctx, y, "y");
  auto r =
      run_recording(ctx, [&](Recorder& rec) { return ops.softcap(rec, Binding{&yb}, count, cap); });
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::vector<float> got = from_device<float>(ctx, yb, count);
  // tanh_f32 (shaders/tanh.glsl) is within ~1e-6 relative everywhere (series near 0, exp
  // elsewhere), std::tanh within an ulp, plus the division and the product.
  int bad = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const float want = std::tanh(y[i] / cap) * cap;
    const double tol = 1e-5 * std::fabs(want) + 1e-37;
    if (!(std::fabs(double(got[i]) - want) <= tol) && ++bad <= 5) {
      ADD_FAILURE() << "y[" << i << "] = " << got[i] << ", reference " << want << " (from " << y[i]
                    << ")";
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST_F(GpuElementwise, SoftcapMatchesCpuReference) {
  for (uint32_t count : {1u, 7u, 1000u, 262144u}) check_softcap(*ctx_, *ops_, count, 30.0f);
  check_softcap(*ctx_, *ops_, 1000, 50.0f);
}

// More workgroups than the ops put along x (kMaxGroupsX of at most 256 invocations): the rest
// wrap into y.
TEST_F(GpuElementwise, SoftcapCoversCountsPastTheGridLimit) {
  check_softcap(*ctx_, *ops_, kMaxGroupsX * 256 + 1001, 30.0f);
}

// Logits for the selection tests: `levels` distinct values (so many ties) or continuous, with
// the row's largest values planted at a few positions.
std::vector<float> logits_with_ties(uint32_t T, uint32_t V, uint32_t levels, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(size_t(T) * V);
  if (levels == 0) {
    std::normal_distribution<float> dist(0.0f, 3.0f);
    for (float& x : v) x = dist(rng);
  } else {
    std::uniform_int_distribution<uint32_t> dist(0, levels - 1);
    for (float& x : v) x = float(dist(rng)) * 0.25f - 8.0f;
  }
  std::uniform_int_distribution<uint32_t> pos(0, V - 1);
  for (uint32_t t = 0; t < T; ++t) {
    for (int i = 0; i < 3; ++i) v[size_t(t) * V + pos(rng)] = 100.0f;  // a tie at the top
  }
  return v;
}

// out[t] against model/sampling.h's argmax (lowest index on ties, NaN never wins).
void check_argmax(const VulkanContext& ctx, const ElementwiseOps& ops,
                  const std::vector<float>& logits, uint32_t T, uint32_t V) {
  SCOPED_TRACE("T " + std::to_string(T) + " V " + std::to_string(V));
  const Buffer lb = to_device(ctx, logits, "logits");
  const Buffer ob = to_device(ctx, std::vector<uint32_t>(T, 0xdeadbeef), "out");
  auto r = run_recording(
      ctx, [&](Recorder& rec) { return ops.argmax(rec, Binding{&lb}, Binding{&ob}, T, V); });
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::vector<uint32_t> got = from_device<uint32_t>(ctx, ob, T);
  for (uint32_t t = 0; t < T; ++t) {
    const int32_t want = argmax(std::span<const float>(logits.data() + size_t(t) * V, V));
    ASSERT_EQ(got[t], uint32_t(want)) << "row " << t;
  }
}

TEST_F(GpuElementwise, ArgmaxMatchesCpuLoop) {
  for (uint32_t V : {1u, 7u, 1000u, 5000u, 262144u}) {
    for (uint32_t T : {1u, 3u}) {
      check_argmax(*ctx_, *ops_, logits_with_ties(T, V, 16, V + T), T, V);
      check_argmax(*ctx_, *ops_, logits_with_ties(T, V, 0, V * 3 + T), T, V);
    }
  }
  // Enough rows for one workgroup a row, in a single pass.
  check_argmax(*ctx_, *ops_, logits_with_ties(300, 1000, 16, 9), 300, 1000);
}

// Rows of all-equal values, -inf, NaN, and the maximum at either end.
TEST_F(GpuElementwise, ArgmaxHandlesTiesInfinitiesAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const uint32_t V = 5000;
  std::vector<std::vector<float>> rows = {std::vector<float>(V, 1.5f), std::vector<float>(V, -inf),
                                          std::vector<float>(V, nan),  std::vector<float>(V, -1.0f),
                                          std::vector<float>(V, 0.0f), std::vector<float>(V, 2.0f)};
  rows[2][4000] = -inf;   // NaN everywhere else: -inf wins
  rows[3][V - 1] = 7.0f;  // the last entry
  rows[4][0] = -0.0f;     // -0 ties +0: the lowest index wins
  rows[5][0] = nan;       // NaN first, then a tie over the rest
  rows[5][4999] = inf;
  std::vector<float> logits;
  for (const auto& r : rows) logits.insert(logits.end(), r.begin(), r.end());
  check_argmax(*ctx_, *ops_, logits, uint32_t(rows.size()), V);
}

// The k best of each row: value descending, lower index first on ties.
void check_top_k(const VulkanContext& ctx, const ElementwiseOps& ops,
                 const std::vector<float>& logits, uint32_t T, uint32_t V, uint32_t k) {
  SCOPED_TRACE("T " + std::to_string(T) + " V " + std::to_string(V) + " k " + std::to_string(k));
  const Buffer lb = to_device(ctx, logits, "logits");
  const Buffer vb = to_device(ctx, std::vector<float>(size_t(T) * k, NAN), "values");
  const Buffer ib = to_device(ctx, std::vector<uint32_t>(size_t(T) * k, 0xdeadbeef), "indices");
  auto r = run_recording(ctx, [&](Recorder& rec) {
    return ops.top_k(rec, Binding{&lb}, Binding{&vb}, Binding{&ib}, T, V, k);
  });
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::vector<float> values = from_device<float>(ctx, vb, size_t(T) * k);
  const std::vector<uint32_t> indices = from_device<uint32_t>(ctx, ib, size_t(T) * k);
  std::vector<uint32_t> order(V);
  for (uint32_t t = 0; t < T; ++t) {
    const float* row = logits.data() + size_t(t) * V;
    std::iota(order.begin(), order.end(), 0u);
    // NaN ranks below everything (as in argmax); the rest by value, then index.
    auto key = [&](uint32_t i) { return std::isnan(row[i]) ? -INFINITY : row[i]; };
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](uint32_t a, uint32_t b) {
      const bool na = std::isnan(row[a]), nb = std::isnan(row[b]);
      if (na != nb) return nb;
      return key(a) > key(b) || (key(a) == key(b) && a < b);
    });
    for (uint32_t j = 0; j < k; ++j) {
      const size_t o = size_t(t) * k + j;
      ASSERT_EQ(indices[o], order[j]) << "row " << t << ", rank " << j;
      if (std::isnan(row[order[j]])) {
        EXPECT_TRUE(std::isnan(values[o])) << "row " << t << ", rank " << j;
      } else {
        ASSERT_EQ(values[o], row[order[j]]) << "row " << t << ", rank " << j;
      }
    }
  }
}

// At the full vocabulary (~1 s a call on lavapipe, 80% of the test), each k takes one of the two
// kinds of rows, alternately: every k and both kinds still meet it.
TEST_F(GpuElementwise, TopKMatchesCpuSort) {
  for (uint32_t V : {128u, 1000u, 20000u, 262144u}) {
    bool ties = true;
    for (uint32_t k : {1u, 5u, 50u, 128u}) {
      const bool full = V == 262144u;
      if (!full || ties) check_top_k(*ctx_, *ops_, logits_with_ties(1, V, 16, V + k), 1, V, k);
      if (!full || !ties) {
        check_top_k(*ctx_, *ops_, logits_with_ties(2, V, 0, V * 3 + k), 2, V, k);
      }
      ties = !ties;
    }
  }
  // Enough rows for one workgroup a row, in a single pass.
  check_top_k(*ctx_, *ops_, logits_with_ties(260, 1000, 64, 5), 260, 1000, 40);
}

// Ascending logits pass the streaming filter every time (a flush per chunk); descending ones
// never after the first; k = V keeps everything, NaN and infinities last and first.
TEST_F(GpuElementwise, TopKHandlesAdversarialOrdersAndSpecialValues) {
  const uint32_t V = 30000;
  std::vector<float> up(V), down(V);
  for (uint32_t i = 0; i < V; ++i) {
    up[i] = float(i) * 0.01f;
    down[i] = -float(i) * 0.01f;
  }
  check_top_k(*ctx_, *ops_, up, 1, V, 128);
  check_top_k(*ctx_, *ops_, down, 1, V, 128);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> special = {1.0f, nan, -inf, 0.0f, -0.0f, inf, 1.0f, -inf, nan, 2.0f};
  check_top_k(*ctx_, *ops_, special, 1, 10, 10);
  check_top_k(*ctx_, *ops_, special, 1, 10, 4);
}

}  // namespace
}  // namespace infer::gpu
