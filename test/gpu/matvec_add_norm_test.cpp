// The fused product + residual step (gpu/ops/matvec_add_norm.h) against the CPU reference and
// against the unfused sequence (gelu_mul, matvec, add_norm) it replaces, for every weight format
// on ragged shapes (rows not a multiple of a workgroup's, odd widths), with and without the next
// norm and the PLE block's gated input; recorded several times in one recording and replayed, so
// the completion counter must reset after every dispatch.
#include "gpu/ops/matvec_add_norm.h"

#include <cfloat>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gpu/ops/elementwise.h"
#include "gpu/ops/norm.h"
#include "model/matrix.h"
#include "model/ops/gelu.h"
#include "model/ops/rms_norm.h"
#include "test/gpu/gpu_test_env.h"
#include "test/gpu/host_matrix.h"
#include "test/gpu/op_test_buffers.h"

namespace infer::gpu {
namespace {

constexpr float kEps = 1e-6f;

struct Case {
  WeightFormat format;
  uint32_t H;     // rows of W: the stream's width
  uint32_t cols;  // a multiple of 32 for Q8_0/Q4_0
  bool gelu;      // the PLE block's gelu(x) ⊙ ple slice as input
  bool next;      // h = rmsnorm(x) · next_w too
  bool mixed;     // repeated steps: all but the last without the next norm (other pipeline)
  float scale;    // the layer scalar
};

std::string case_name(const Case& c) {
  return std::string(weight_format_name(c.format)) + " H " + std::to_string(c.H) + " cols " +
         std::to_string(c.cols) + (c.gelu ? " gelu" : "") + (c.next ? " next" : "");
}

struct Outputs {
  std::vector<float> o, x, h;
};

// The step recorded `repeats` times in one recording (the stream moves on each time), replayed
// `replays` times; then o, the stream and h read back. The unfused path overwrites x with the
// gated input, so it runs once only (restoring x with a copy before gelu_mul's in-place dispatch
// trips the recorder: its one barrier for a buffer bound twice, read then written, carries only
// the read access).
Outputs run_steps(const VulkanContext& ctx, const MatvecOp& mv, const NormOps& norm,
              const ElementwiseOps& ew, const GpuMatrix& w, const Case& c,
              const std::vector<float>& x, const std::vector<float>& ple,
              const std::vector<float>& stream, const std::vector<float>& w_post,
              const std::vector<float>& next_w, int repeats, int replays) {
  const Buffer xb = to_device(ctx, x, "x");
  const Buffer pb = to_device(ctx, ple, "ple");
  const Buffer ob = to_device(ctx, std::vector<float>(c.H, NAN), "o");
  const Buffer sb = to_device(ctx, stream, "stream");
  const Buffer wb = to_device(ctx, w_post, "w_post");
  const Buffer nb = to_device(ctx, next_w, "next_w");
  const Buffer hb = to_device(ctx, std::vector<float>(c.H, NAN), "h");
  GeluMulInput gelu;
  gelu.b = Binding{&pb};
  gelu.b_stride = 3 * c.cols;  // slice 1 of 3 "layers", as ple [T, L·P]
  gelu.b_off = c.cols;
  AddNormArgs an;
  an.x = Binding{&sb};
  an.w_post = Binding{&wb};
  an.scale = c.scale;
  if (c.next) {
    an.next_w = Binding{&nb};
    an.h = Binding{&hb};
  }
  an.eps = kEps;
  std::unique_ptr<Recorder> rec = Recorder::create(ctx).value();
  EXPECT_TRUE(rec->begin(/*reusable=*/true).ok());
  for (int i = 0; i < repeats; ++i) {
    AddNormArgs step = an;
    if (c.mixed && i + 1 < repeats) step.next_w = step.h = Binding{};
    auto r = record_matvec_add_norm(*rec, mv, norm, ew, w, Binding{&xb}, c.gelu ? &gelu : nullptr,
                                    Binding{&ob}, step, 1);
    EXPECT_TRUE(r.ok()) << r.error().message;
  }
  for (int i = 0; i < replays; ++i) {
    auto r = rec->submit_and_wait();
    EXPECT_TRUE(r.ok()) << r.error().message;
  }
  return Outputs{from_device<float>(ctx, ob, c.H), from_device<float>(ctx, sb, c.H),
             from_device<float>(ctx, hb, c.H)};
}

// Expects |got - want| <= tol[i] elementwise.
void expect_within(const std::vector<float>& got, const std::vector<float>& want,
                   const std::vector<double>& tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(double(got[i]) - double(want[i])) <= tol[i]) && ++bad <= 5) {
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", want " << want[i]
                    << ", tolerance " << tol[i];
    }
  }
  EXPECT_EQ(bad, 0) << what << ": of " << got.size();
}

class GpuMatvecAddNorm : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    norm_ = NormOps::create(*ctx_).value();
    ew_ = ElementwiseOps::create(*ctx_).value();
  }
  void TearDown() override {
    norm_.reset();
    ew_.reset();
    GpuTest::TearDown();
  }

  // The fused op vs the CPU and vs the unfused sequence, `repeats` x `replays` steps.
  void check(const Case& c, int repeats, int replays) {
    SCOPED_TRACE(case_name(c) + ", " + std::to_string(repeats) + " steps x " +
                 std::to_string(replays) + " replays");
    const uint32_t seed = c.H * 131 + c.cols;
    const HostMatrix hm = random_matrix(c.format, c.H, c.cols, seed);
    const GpuMatrix w = upload_matrix(*ctx_, hm.m, "w").value();
    const std::vector<float> x = random_vector(c.cols, seed + 1, -2.0f, 2.0f);
    const std::vector<float> ple = random_vector(3 * c.cols, seed + 2);
    const std::vector<float> stream = random_vector(c.H, seed + 3, -3.0f, 3.0f);
    const std::vector<float> w_post = random_vector(c.H, seed + 4, 0.5f, 1.5f);
    const std::vector<float> next_w = random_vector(c.H, seed + 5, 0.5f, 1.5f);

    MatvecTuning on;
    on.fuse_add_norm = true;
    const std::unique_ptr<MatvecOp> fused = MatvecOp::create(*ctx_, c.format, on).value();
    const std::unique_ptr<MatvecOp> plain = MatvecOp::create(*ctx_, c.format).value();
    ASSERT_NE(fused->add_norm_op(), nullptr);
    ASSERT_TRUE(fused->add_norm_op()->applies(w, 1));  // else this compares unfused with itself
    ASSERT_EQ(plain->add_norm_op(), nullptr);
    const Outputs got = run_steps(*ctx_, *fused, *norm_, *ew_, w, c, x, ple, stream, w_post, next_w,
                              repeats, replays);
    const Outputs ref =
        run_steps(*ctx_, *plain, *norm_, *ew_, w, c, x, ple, stream, w_post, next_w, 1, 1);

    // o against the CPU: the GPU sums in f32 in its own order (matvec_test.cpp argues
    // 8 eps sqrt(cols) of S = sum |w · in|); the gated input errs by a few ulp of each term.
    std::vector<float> in(c.cols), row(c.cols), o_want(c.H);
    for (uint32_t j = 0; j < c.cols; ++j) in[j] = c.gelu ? gelu_tanh(x[j]) * ple[c.cols + j] : x[j];
    std::vector<double> o_tol(c.H);
    for (uint32_t r = 0; r < c.H; ++r) {
      dequantize_row(hm.m, r, row.data());
      double sum = 0, abs_sum = 0;
      for (uint32_t j = 0; j < c.cols; ++j) {
        sum += double(row[j]) * in[j];
        abs_sum += std::fabs(double(row[j]) * in[j]);
      }
      o_want[r] = float(sum);
      o_tol[r] = (8.0 * FLT_EPSILON * std::sqrt(double(c.cols)) + (c.gelu ? 1e-6 : 0.0)) * abs_sum +
                 1e-30;
    }
    expect_within(got.o, o_want, o_tol, "o (fused)");
    expect_within(got.o, ref.o, o_tol, "o (fused vs unfused)");

    // The stream after every step, on the CPU from the GPU's o: norm_test.cpp's bound (1e-5 of
    // the magnitudes summed), which grows by each step's |rmsnorm(o) · w_post|.
    const int steps = repeats * replays;
    std::vector<float> xs = stream, o_n(c.H), h_want(c.H);
    std::vector<double> mag(c.H);
    for (uint32_t i = 0; i < c.H; ++i) mag[i] = std::fabs(stream[i]);
    rms_norm(got.o.data(), w_post.data(), 1, c.H, kEps, o_n.data());
    for (int k = 0; k < steps; ++k) {
      for (uint32_t i = 0; i < c.H; ++i) {
        xs[i] = (xs[i] + o_n[i]) * c.scale;
        mag[i] = (mag[i] + std::fabs(o_n[i])) * std::fabs(c.scale);
      }
    }
    std::vector<double> x_tol(c.H), h_tol(c.H);
    double sum_sq = 0;
    for (float v : xs) sum_sq += double(v) * v;
    const double inv = 1.0 / std::sqrt(sum_sq / c.H + kEps);
    rms_norm(xs.data(), next_w.data(), 1, c.H, kEps, h_want.data());
    for (uint32_t i = 0; i < c.H; ++i) {
      x_tol[i] = 1e-5 * (steps + 1) * mag[i] + 1e-30;
      h_tol[i] = x_tol[i] * inv * next_w[i] + 1e-5 * std::fabs(h_want[i]) + 1e-30;
    }
    expect_within(got.x, xs, x_tol, "stream (fused)");
    if (steps == 1) expect_within(got.x, ref.x, x_tol, "stream (fused vs unfused)");
    if (c.next) {
      expect_within(got.h, h_want, h_tol, "h (fused)");
      if (steps == 1) expect_within(got.h, ref.h, h_tol, "h (fused vs unfused)");
    } else {
      for (float v : got.h) ASSERT_TRUE(std::isnan(v)) << "h written without next_w";
    }
  }

  std::unique_ptr<NormOps> norm_;
  std::unique_ptr<ElementwiseOps> ew_;
};

// Rows not a multiple of a workgroup's (8 quantized, 4 f32/bf16), odd widths, E2B's o_proj and
// PLE projection shapes (H = 1536, cols 2048 / P = 256).
const Case kCases[] = {
    {WeightFormat::kF32, 67, 37, false, true, false, 1.0f},
    {WeightFormat::kF32, 5, 8, true, false, false, 0.37f},
    {WeightFormat::kBF16, 130, 70, false, false, false, 1.0f},
    {WeightFormat::kBF16, 1001, 256, true, true, false, 0.37f},
    {WeightFormat::kQ8_0, 67, 96, false, true, false, 1.0f},
    {WeightFormat::kQ8_0, 1536, 256, true, true, false, 0.5f},
    {WeightFormat::kQ4_0, 1001, 256, true, true, false, 1.0f},
    {WeightFormat::kQ4_0, 1536, 2048, false, false, false, 1.0f},
    {WeightFormat::kQ4_0, 3, 32, false, true, false, 2.0f},
};

TEST_F(GpuMatvecAddNorm, MatchesCpuAndUnfusedSequence) {
  for (const Case& c : kCases) check(c, 1, 1);
}

// Three steps in one recording, replayed twice: a counter left non-zero by any dispatch would
// make no workgroup (or the wrong one) the last, and leave the stream behind.
TEST_F(GpuMatvecAddNorm, CounterResetsAcrossStepsAndReplays) {
  for (const Case& c : kCases) check(c, 3, 2);
}

// The plain and next-norm pipelines share the op's counter: both in one recording.
TEST_F(GpuMatvecAddNorm, PlainAndNextNormShareTheCounter) {
  check({WeightFormat::kQ4_0, 77, 64, true, true, true, 1.0f}, 3, 2);
  check({WeightFormat::kBF16, 33, 40, false, true, true, 0.8f}, 3, 2);
}

}  // namespace
}  // namespace infer::gpu
