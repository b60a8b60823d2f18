// GPU RMSNorm family (gpu/ops/rms_norm.h) vs the CPU reference (model/ops/rms_norm.h): odd row
// lengths, one and many rows, in place, with and without weight, fused add + next norm.
#include "gpu/ops/rms_norm.h"

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu/ops/op_common.h"
#include "model/ops/rms_norm.h"
#include "test/gpu/gpu_test_env.h"
#include "test/gpu/op_test_buffers.h"

namespace infer::gpu {
namespace {

constexpr float kEps = 1e-6f;
// The GPU sums squares in f32 (per-invocation partials, subgroupAdd, subgroup partials), the
// reference in double: for n <= 5376 and rows of like-signed squares that is a relative error
// of a few 1e-7 in the mean, half that in 1/rms, plus two or three roundings per output. An
// output made of several terms errs relative to the sum of their magnitudes. 1e-5 leaves a
// margin of over 10x.
constexpr double kRel = 1e-5;

const uint32_t kLengths[] = {1, 7, 33, 256, 1536, 3840, 5376};

// Uniform in [-1, 1] times a per-row magnitude from 1e-3 to 1e3, so ε and the scale both show.
std::vector<float> random_rows(uint32_t rows, uint32_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(size_t(rows) * n);
  for (uint32_t r = 0; r < rows; ++r) {
    const float mag = std::pow(10.0f, float(int(r % 7) - 3));
    for (uint32_t i = 0; i < n; ++i) v[size_t(r) * n + i] = dist(rng) * mag;
  }
  return v;
}

std::vector<float> random_weight(uint32_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(0.5f, 1.5f);
  std::vector<float> w(n);
  for (float& x : w) x = dist(rng);
  return w;
}

// Expects got[i] within kRel · scale[i] of want[i] (scale: the magnitude the error is relative to).
void expect_near(const std::vector<float>& got, const std::vector<float>& want,
                 const std::vector<float>& scale, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = kRel * double(scale[i]) + 1e-30;
    if (!(std::fabs(double(got[i]) - double(want[i])) <= tol) && ++bad <= 5) {
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", reference " << want[i]
                    << ", tolerance " << tol;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": of " << got.size();
}

std::vector<float> abs_of(const std::vector<float>& v) {
  std::vector<float> a(v.size());
  for (size_t i = 0; i < v.size(); ++i) a[i] = std::fabs(v[i]);
  return a;
}

class GpuRmsNorm : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (ctx_ == nullptr) return;
    ops_ = RmsNormOps::create(*ctx_).value();
  }
  std::unique_ptr<RmsNormOps> ops_;
};

// rows x n through rms_norm, into a separate buffer at an offset or in place.
void check_rms_norm(const VulkanContext& ctx, const RmsNormOps& ops, uint32_t rows, uint32_t n,
                    bool weight, bool in_place) {
  SCOPED_TRACE("rows " + std::to_string(rows) + " n " + std::to_string(n) +
               (weight ? " weight" : " no weight") + (in_place ? " in place" : ""));
  const std::vector<float> x = random_rows(rows, n, rows * 31 + n);
  const std::vector<float> w = random_weight(n, n);
  std::vector<float> want(x.size());
  rms_norm(x.data(), weight ? w.data() : nullptr, rows, n, kEps, want.data());

  constexpr size_t kPad = 256;  // a binding offset, aligned on every device
  const Buffer xb = to_device(ctx, x, "x", kPad);
  const Buffer wb = to_device(ctx, w, "w");
  const Buffer ob = to_device(ctx, std::vector<float>(x.size(), NAN), "out");
  const Binding xbind{&xb, kPad};
  const Binding out = in_place ? xbind : Binding{&ob};
  auto r = run_recording(ctx, [&](Recorder& rec) {
    return ops.rms_norm(rec, xbind, weight ? Binding{&wb} : Binding{}, out, rows, n, kEps);
  });
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::vector<float> got = in_place ? from_device<float>(ctx, xb, x.size(), kPad)
                                          : from_device<float>(ctx, ob, x.size());
  expect_near(got, want, abs_of(want), "out");
}

TEST_F(GpuRmsNorm, RmsNormMatchesCpuReference) {
  for (uint32_t n : kLengths) {
    for (uint32_t rows : {1u, 9u}) {
      check_rms_norm(*ctx_, *ops_, rows, n, true, false);
      check_rms_norm(*ctx_, *ops_, rows, n, false, false);
    }
  }
}

TEST_F(GpuRmsNorm, RmsNormInPlaceMatchesCpuReference) {
  for (uint32_t n : {7u, 256u, 3840u}) {
    check_rms_norm(*ctx_, *ops_, 5, n, true, true);
    check_rms_norm(*ctx_, *ops_, 5, n, false, true);
  }
}

// More rows than the ops put along x (kMaxGroupsX): the rest wrap into y.
TEST_F(GpuRmsNorm, RmsNormCoversRowsPastTheGridLimit) {
  check_rms_norm(*ctx_, *ops_, kMaxGroupsX + 37, 3, true, false);
}

// The zero row: ε keeps 1/rms finite, and the output is 0.
TEST_F(GpuRmsNorm, RmsNormOfZerosIsZero) {
  const uint32_t n = 33;
  const Buffer xb = to_device(*ctx_, std::vector<float>(n, 0.0f), "x");
  const Buffer ob = to_device(*ctx_, std::vector<float>(n, NAN), "out");
  auto r = run_recording(*ctx_, [&](Recorder& rec) {
    return ops_->rms_norm(rec, Binding{&xb}, Binding{}, Binding{&ob}, 1, n, kEps);
  });
  ASSERT_TRUE(r.ok()) << r.error().message;
  for (float v : from_device<float>(*ctx_, ob, n)) EXPECT_EQ(v, 0.0f);
}

// x = (x + rmsnorm(o)·w_post)·scale, then optionally h = rmsnorm(x)·next_w.
void check_add_norm(const VulkanContext& ctx, const RmsNormOps& ops, uint32_t T, uint32_t n,
                    float scale, bool fuse_next) {
  SCOPED_TRACE("T " + std::to_string(T) + " n " + std::to_string(n) + " scale " +
               std::to_string(scale) + (fuse_next ? " with next norm" : ""));
  const std::vector<float> x = random_rows(T, n, T * 7 + n);
  const std::vector<float> o = random_rows(T, n, T * 11 + n + 1);
  const std::vector<float> w_post = random_weight(n, n + 2);
  const std::vector<float> next_w = random_weight(n, n + 3);

  std::vector<float> o_n(x.size()), x_want(x.size()), x_scale(x.size());
  rms_norm(o.data(), w_post.data(), T, n, kEps, o_n.data());
  for (size_t i = 0; i < x.size(); ++i) {
    x_want[i] = (x[i] + o_n[i]) * scale;
    x_scale[i] = (std::fabs(x[i]) + std::fabs(o_n[i])) * std::fabs(scale);
  }
  std::vector<float> h_want(x.size()), h_scale(x.size());
  rms_norm(x_want.data(), next_w.data(), T, n, kEps, h_want.data());
  // h's error: x's, carried through 1/rms(x) and next_w, plus its own.
  for (uint32_t t = 0; t < T; ++t) {
    double sum_sq = 0;
    for (uint32_t i = 0; i < n; ++i) sum_sq += double(x_want[t * n + i]) * x_want[t * n + i];
    const double inv = 1.0 / std::sqrt(sum_sq / n + kEps);
    for (uint32_t i = 0; i < n; ++i) {
      const size_t e = size_t(t) * n + i;
      h_scale[e] = float(x_scale[e] * inv * next_w[i] + std::fabs(h_want[e]));
    }
  }

  const Buffer xb = to_device(ctx, x, "x");
  const Buffer ob = to_device(ctx, o, "o");
  const Buffer wb = to_device(ctx, w_post, "w_post");
  const Buffer nb = to_device(ctx, next_w, "next_w");
  const Buffer hb = to_device(ctx, std::vector<float>(x.size(), NAN), "h");
  auto r = run_recording(ctx, [&](Recorder& rec) {
    return ops.add_norm(rec, Binding{&xb}, Binding{&ob}, Binding{&wb}, scale,
                        fuse_next ? Binding{&nb} : Binding{}, fuse_next ? Binding{&hb} : Binding{},
                        T, n, kEps);
  });
  ASSERT_TRUE(r.ok()) << r.error().message;
  expect_near(from_device<float>(ctx, xb, x.size()), x_want, x_scale, "x");
  const std::vector<float> h = from_device<float>(ctx, hb, x.size());
  if (fuse_next) {
    expect_near(h, h_want, h_scale, "h");
  } else {
    for (float v : h) ASSERT_TRUE(std::isnan(v)) << "h written without next_w";
  }
}

TEST_F(GpuRmsNorm, AddNormMatchesCpuReference) {
  for (uint32_t n : kLengths) {
    for (uint32_t T : {1u, 4u}) {
      check_add_norm(*ctx_, *ops_, T, n, 1.0f, true);
      check_add_norm(*ctx_, *ops_, T, n, 1.0f, false);
    }
  }
}

TEST_F(GpuRmsNorm, AddNormAppliesTheLayerScalar) {
  for (uint32_t n : {33u, 1536u}) {
    check_add_norm(*ctx_, *ops_, 3, n, 0.37f, true);
    check_add_norm(*ctx_, *ops_, 3, n, 0.37f, false);
  }
}

// out = rmsnorm(a)·wa + rmsnorm(b)·wb, into a separate buffer or in place over a.
void check_norm_sum(const VulkanContext& ctx, const RmsNormOps& ops, uint32_t T, uint32_t n,
                    bool in_place) {
  SCOPED_TRACE("T " + std::to_string(T) + " n " + std::to_string(n) +
               (in_place ? " in place" : ""));
  const std::vector<float> a = random_rows(T, n, T * 13 + n);
  const std::vector<float> b = random_rows(T, n, T * 17 + n + 5);
  const std::vector<float> wa = random_weight(n, n + 7);
  const std::vector<float> wb = random_weight(n, n + 8);
  std::vector<float> na(a.size()), nb(a.size()), want(a.size()), scale(a.size());
  rms_norm(a.data(), wa.data(), T, n, kEps, na.data());
  rms_norm(b.data(), wb.data(), T, n, kEps, nb.data());
  for (size_t i = 0; i < a.size(); ++i) {
    want[i] = na[i] + nb[i];
    scale[i] = std::fabs(na[i]) + std::fabs(nb[i]);
  }
  const Buffer ab = to_device(ctx, a, "a");
  const Buffer bb = to_device(ctx, b, "b");
  const Buffer wab = to_device(ctx, wa, "wa");
  const Buffer wbb = to_device(ctx, wb, "wb");
  const Buffer ob = to_device(ctx, std::vector<float>(a.size(), NAN), "out");
  const Binding out = in_place ? Binding{&ab} : Binding{&ob};
  auto r = run_recording(ctx, [&](Recorder& rec) {
    return ops.norm_sum(rec, Binding{&ab}, Binding{&wab}, Binding{&bb}, Binding{&wbb}, out, T, n,
                        kEps);
  });
  ASSERT_TRUE(r.ok()) << r.error().message;
  expect_near(from_device<float>(ctx, in_place ? ab : ob, a.size()), want, scale, "out");
}

TEST_F(GpuRmsNorm, NormSumMatchesCpuReference) {
  for (uint32_t n : kLengths) {
    for (uint32_t T : {1u, 3u}) check_norm_sum(*ctx_, *ops_, T, n, false);
  }
  check_norm_sum(*ctx_, *ops_, 2, 2816, true);
}

// Pipelines sized for a short model row (create(ctx, 40): 40 rounded up to whole subgroups)
// still normalize rows of any length, shorter and far longer than the workgroup.
TEST_F(GpuRmsNorm, OpsSizedForAShortRowHandleEveryLength) {
  auto sized = RmsNormOps::create(*ctx_, 40);
  ASSERT_TRUE(sized.ok()) << sized.error().message;
  for (uint32_t n : {1u, 40u, 33u, 1536u}) {
    check_rms_norm(*ctx_, **sized, 3, n, true, false);
    check_add_norm(*ctx_, **sized, 2, n, 0.37f, true);
    check_norm_sum(*ctx_, **sized, 2, n, false);
  }
}

// add_norm's registers variants sized for the model's rows (1536 and 5376 on 512-wide workgroups: 3
// and 11 elements an invocation) and unsized (16), rows longer than they hold taking the loop
// form.
TEST_F(GpuRmsNorm, AddNormRegistersAndLoopFormsMatchCpuReference) {
  for (uint32_t row_n : {0u, 1536u, 5376u}) {
    auto ops = RmsNormOps::create(*ctx_, row_n);
    ASSERT_TRUE(ops.ok()) << ops.error().message;
    SCOPED_TRACE("ops sized for " + std::to_string(row_n));
    for (uint32_t n : kLengths) {
      check_add_norm(*ctx_, **ops, n > 1536 ? 1 : 3, n, 0.37f, true);
      check_add_norm(*ctx_, **ops, 1, n, 1.0f, false);
    }
  }
}

// The three ops back to back in one recording, as a layer records them: each reads what the one
// before wrote (the recorder's barriers), and nothing else changes the result.
TEST_F(GpuRmsNorm, ChainedOpsMatchCpuReference) {
  const uint32_t T = 2, n = 1536;
  const std::vector<float> x = random_rows(T, n, 1), o = random_rows(T, n, 2);
  const std::vector<float> w1 = random_weight(n, 3), w2 = random_weight(n, 4);
  // want: h = rmsnorm(x + rmsnorm(o)·w1; w2); out = rmsnorm(h)·w1 + rmsnorm(o)·w2.
  std::vector<float> t(x.size()), xs(x.size()), h(x.size()), a(x.size()), b(x.size());
  rms_norm(o.data(), w1.data(), T, n, kEps, t.data());
  for (size_t i = 0; i < x.size(); ++i) xs[i] = x[i] + t[i];
  rms_norm(xs.data(), w2.data(), T, n, kEps, h.data());
  rms_norm(h.data(), w1.data(), T, n, kEps, a.data());
  rms_norm(o.data(), w2.data(), T, n, kEps, b.data());
  std::vector<float> want(x.size()), scale(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    want[i] = a[i] + b[i];
    scale[i] = std::fabs(a[i]) + std::fabs(b[i]);
  }
  const Buffer xb = to_device(*ctx_, x, "x"), ob = to_device(*ctx_, o, "o");
  const Buffer w1b = to_device(*ctx_, w1, "w1"), w2b = to_device(*ctx_, w2, "w2");
  const Buffer hb = to_device(*ctx_, std::vector<float>(x.size()), "h");
  const Buffer outb = to_device(*ctx_, std::vector<float>(x.size()), "out");
  auto r = run_recording(*ctx_, [&](Recorder& rec) -> Result<void> {
    INFER_TRY_VOID(ops_->add_norm(rec, Binding{&xb}, Binding{&ob}, Binding{&w1b}, 1.0f,
                                  Binding{&w2b}, Binding{&hb}, T, n, kEps));
    return ops_->norm_sum(rec, Binding{&hb}, Binding{&w1b}, Binding{&ob}, Binding{&w2b},
                          Binding{&outb}, T, n, kEps);
  });
  ASSERT_TRUE(r.ok()) << r.error().message;
  expect_near(from_device<float>(*ctx_, outb, x.size()), want, scale, "out");
}

}  // namespace
}  // namespace infer::gpu
