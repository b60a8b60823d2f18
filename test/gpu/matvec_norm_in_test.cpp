// The product with the stream step in its prologue (gpu/ops/matvec_norm_in.h) against the CPU
// reference and against the separate dispatches it replaces (add_norm or rms_norm or gelu_mul,
// then the matvec or gate-up), for every weight format and both kinds, on ragged shapes (rows not
// a multiple of a workgroup's, widths not a multiple of 4: the scalar loads), with and without
// the residual step and the norm, the layer scalar, the gated PLE input, and several subgroup
// slots a workgroup; then steps chained through the two stream buffers in one replayed recording.
#include "gpu/ops/matvec_norm_in.h"

#include <gtest/gtest.h>

#include <array>
#include <cfloat>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gpu/ops/elementwise.h"
#include "gpu/ops/mlp.h"
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

enum class In { kAddNorm, kAdd, kNorm, kGelu };

struct Case {
  WeightFormat format;
  bool gate_up;
  uint32_t rows;
  uint32_t cols;  // H (P with kGelu); a multiple of 32 for Q8_0/Q4_0
  In in;
  float scale;  // the layer scalar of the residual step
};

std::string case_name(const Case& c) {
  static const char* kIn[] = {"add+norm", "add", "norm", "gelu"};
  return std::string(c.gate_up ? "gate-up " : "matvec ") + weight_format_name(c.format) + " " +
         std::to_string(c.rows) + "x" + std::to_string(c.cols) + " " + kIn[int(c.in)] +
         " scale " + std::to_string(c.scale);
}

// Host inputs of one case.
struct Inputs {
  HostMatrix w, up;
  std::vector<float> x, o, w_post, norm_w, ple;
};

Inputs make_inputs(const Case& c) {
  const uint32_t seed = c.rows * 131 + c.cols * 7 + uint32_t(c.in);
  Inputs in;
  in.w = random_matrix(c.format, c.rows, c.cols, seed);
  if (c.gate_up) in.up = random_matrix(c.format, c.rows, c.cols, seed + 1);
  in.x = random_vector(c.cols, seed + 2, -3.0f, 3.0f);
  in.o = random_vector(c.cols, seed + 3, -5.0f, 5.0f);
  in.w_post = random_vector(c.cols, seed + 4, 0.5f, 1.5f);
  in.norm_w = random_vector(c.cols, seed + 5, 0.5f, 1.5f);
  in.ple = random_vector(3 * size_t(c.cols), seed + 6);  // slice 1 of 3 "layers"
  return in;
}

// What the CPU computes: the stream after the step, the product's input, and y with each
// output's Σ|terms| (gate-up: of the gate and the up sums, and the outputs' magnitudes).
struct Want {
  std::vector<float> stream, in, y;
  std::vector<double> stream_mag, y_tol;
};

Want cpu_reference(const Case& c, const Inputs& in) {
  Want w;
  const uint32_t n = c.cols;
  w.stream = in.x;
  w.stream_mag.resize(n);
  for (uint32_t i = 0; i < n; ++i) w.stream_mag[i] = std::fabs(in.x[i]);
  if (c.in == In::kAddNorm || c.in == In::kAdd) {
    std::vector<float> o_n(n);
    rms_norm(in.o.data(), in.w_post.data(), 1, n, kEps, o_n.data());
    for (uint32_t i = 0; i < n; ++i) {
      w.stream[i] = (in.x[i] + o_n[i]) * c.scale;
      w.stream_mag[i] = (std::fabs(in.x[i]) + std::fabs(o_n[i])) * std::fabs(c.scale);
    }
  }
  w.in = w.stream;
  if (c.in == In::kAddNorm || c.in == In::kNorm) {
    rms_norm(w.stream.data(), in.norm_w.data(), 1, n, kEps, w.in.data());
  }
  if (c.in == In::kGelu) {
    for (uint32_t i = 0; i < n; ++i) w.in[i] = gelu_tanh(in.x[i]) * in.ple[n + i];
  }
  // The staged input errs by ~1e-6 relative (two f32 reductions, the gelu), the sums by
  // matvec_test.cpp's 8 eps sqrt(cols) of Σ|w · in|: 2e-5 of Σ|w · in| covers both.
  const double rel = 8.0 * FLT_EPSILON * std::sqrt(double(n)) + 2e-5;
  std::vector<float> row(n);
  auto dot = [&](const Matrix& m, uint32_t r, double* abs_sum) {
    dequantize_row(m, r, row.data());
    double s = 0;
    *abs_sum = 0;
    for (uint32_t j = 0; j < n; ++j) {
      s += double(row[j]) * w.in[j];
      *abs_sum += std::fabs(double(row[j]) * w.in[j]);
    }
    return s;
  };
  w.y.resize(c.rows);
  w.y_tol.resize(c.rows);
  for (uint32_t r = 0; r < c.rows; ++r) {
    double ga = 0, ua = 0;
    const double g = dot(in.w.m, r, &ga);
    if (!c.gate_up) {
      w.y[r] = float(g);
      w.y_tol[r] = rel * ga + 1e-30;
      continue;
    }
    const double u = dot(in.up.m, r, &ua);
    const double gl = gelu_tanh(float(g));
    w.y[r] = float(gl * u);
    // d gelu / dz is within [-0.2, 1.2]: the gate's error moves y by up to 1.2 |u| of it.
    w.y_tol[r] = rel * (1.2 * ga * std::fabs(u) + ua * std::fabs(gl)) + 1e-6 * std::fabs(gl * u) +
                 1e-30;
  }
  return w;
}

struct Got {
  std::vector<float> y, x, x_out;
};

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

class GpuMatvecNormIn : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (HasFatalFailure()) return;
    norm_ = NormOps::create(*ctx_).value();
    ew_ = ElementwiseOps::create(*ctx_).value();
  }
  void TearDown() override {
    norm_.reset();
    ew_.reset();
    for (auto& op : mv_) op.reset();
    for (auto& op : gu_) op.reset();
    GpuTest::TearDown();
  }

  // The fused op (`tuning`) once; x_out starts NaN, so a missing write shows.
  Got run_fused(const Case& c, const Inputs& in, const GpuMatrix& w, const GpuMatrix* up,
                const NormInTuning& tuning) {
    std::unique_ptr<MatvecNormInOp> op =
        MatvecNormInOp::create(*ctx_, c.format, c.gate_up, c.cols + 5, tuning).value();
    EXPECT_NE(op, nullptr);
    if (op == nullptr) return {};
    EXPECT_TRUE(op->applies(w));
    const Buffer xb = to_device(*ctx_, in.x, "x");
    const Buffer ob = to_device(*ctx_, in.o, "o");
    const Buffer wb = to_device(*ctx_, in.w_post, "w_post");
    const Buffer nb = to_device(*ctx_, in.norm_w, "norm_w");
    const Buffer pb = to_device(*ctx_, in.ple, "ple");
    const Buffer outb = to_device(*ctx_, std::vector<float>(c.cols, NAN), "x_out");
    const Buffer yb = to_device(*ctx_, std::vector<float>(c.rows, NAN), "y");
    NormIn ni;
    ni.x = Binding{&xb};
    ni.eps = kEps;
    if (c.in == In::kAddNorm || c.in == In::kAdd) {
      ni.o = Binding{&ob};
      ni.w_post = Binding{&wb};
      ni.scale = c.scale;
      ni.x_out = Binding{&outb};
    }
    if (c.in == In::kAddNorm || c.in == In::kNorm) ni.norm_w = Binding{&nb};
    if (c.in == In::kGelu) {
      ni.gelu_b = Binding{&pb};
      ni.b_off = c.cols;
    }
    const Result<void> r =
        run_recording(*ctx_, [&](Recorder& rec) { return op->record(rec, w, up, ni, Binding{&yb}); });
    EXPECT_TRUE(r.ok()) << r.error().message;
    return Got{from_device<float>(*ctx_, yb, c.rows), from_device<float>(*ctx_, xb, c.cols),
               from_device<float>(*ctx_, outb, c.cols)};
  }

  // The separate dispatches: add_norm or rms_norm or gelu_mul, then the product.
  Got run_separate(const Case& c, const Inputs& in, const GpuMatrix& w, const GpuMatrix* up) {
    const Buffer xb = to_device(*ctx_, in.x, "x");
    const Buffer ob = to_device(*ctx_, in.o, "o");
    const Buffer wb = to_device(*ctx_, in.w_post, "w_post");
    const Buffer nb = to_device(*ctx_, in.norm_w, "norm_w");
    const Buffer pb = to_device(*ctx_, in.ple, "ple");
    const Buffer hb = to_device(*ctx_, std::vector<float>(c.cols, NAN), "h");
    const Buffer yb = to_device(*ctx_, std::vector<float>(c.rows, NAN), "y");
    // The plain ops, made once per format (each builds several pipelines).
    std::unique_ptr<MatvecOp>& mv = mv_[size_t(c.format)];
    std::unique_ptr<GateUpOp>& gu = gu_[size_t(c.format)];
    if (c.gate_up && gu == nullptr) gu = GateUpOp::create(*ctx_, c.format).value();
    if (!c.gate_up && mv == nullptr) {
      MatvecTuning t;
      t.int_dot = IntDot::kOff;  // the f32 product, as the fused op's
      mv = MatvecOp::create(*ctx_, c.format, t).value();
    }
    const Binding x{&xb}, h{&hb};
    const bool norm = c.in == In::kAddNorm || c.in == In::kNorm;
    const Result<void> r = run_recording(*ctx_, [&](Recorder& rec) -> Result<void> {
      switch (c.in) {
        case In::kAddNorm:
        case In::kAdd:
          INFER_TRY_VOID(norm_->add_norm(rec, x, Binding{&ob}, Binding{&wb}, c.scale,
                                         norm ? Binding{&nb} : Binding{}, norm ? h : Binding{}, 1,
                                         c.cols, kEps));
          break;
        case In::kNorm:
          INFER_TRY_VOID(norm_->rms_norm(rec, x, Binding{&nb}, h, 1, c.cols, kEps));
          break;
        case In::kGelu:
          INFER_TRY_VOID(ew_->gelu_mul(rec, x, c.cols, 0, Binding{&pb}, 3 * c.cols, c.cols, h, 1,
                                       c.cols));
          break;
      }
      const Binding input = norm || c.in == In::kGelu ? h : x;
      if (c.gate_up) return gu->record(rec, w, *up, input, Binding{&yb}, 1);
      return mv->record(rec, w, input, Binding{&yb}, 1);
    });
    EXPECT_TRUE(r.ok()) << r.error().message;
    return Got{from_device<float>(*ctx_, yb, c.rows), from_device<float>(*ctx_, xb, c.cols), {}};
  }

  void check(const Case& c, const NormInTuning& tuning, const char* tuning_name) {
    SCOPED_TRACE(case_name(c) + ", tuning " + tuning_name);
    const Inputs in = make_inputs(c);
    const GpuMatrix w = upload_matrix(*ctx_, in.w.m, "w").value();
    GpuMatrix up;
    if (c.gate_up) up = upload_matrix(*ctx_, in.up.m, "up").value();
    const GpuMatrix* upp = c.gate_up ? &up : nullptr;
    const Want want = cpu_reference(c, in);
    const Got got = run_fused(c, in, w, upp, tuning);
    const Got ref = run_separate(c, in, w, upp);
    if (HasFailure()) return;

    expect_within(got.y, want.y, want.y_tol, "y vs CPU");
    expect_within(got.y, ref.y, want.y_tol, "y vs separate dispatches");
    // The stream: norm_test.cpp's bound, 1e-5 of the magnitudes summed.
    std::vector<double> x_tol(c.cols);
    for (uint32_t i = 0; i < c.cols; ++i) x_tol[i] = 1e-5 * want.stream_mag[i] + 1e-30;
    EXPECT_EQ(got.x, in.x) << "x is read only";
    if (c.in == In::kAddNorm || c.in == In::kAdd) {
      expect_within(got.x_out, want.stream, x_tol, "x_out vs CPU");
      expect_within(got.x_out, ref.x, x_tol, "x_out vs add_norm");
    } else {
      for (float v : got.x_out) ASSERT_TRUE(std::isnan(v)) << "x_out written without a step";
    }
  }

  std::unique_ptr<NormOps> norm_;
  std::unique_ptr<ElementwiseOps> ew_;
  std::array<std::unique_ptr<MatvecOp>, 4> mv_;  // by WeightFormat
  std::array<std::unique_ptr<GateUpOp>, 4> gu_;
};

// Rows not a multiple of a workgroup's; widths not a multiple of 4 (f32, bf16: scalar loads) or
// of 256 (quantized: padding columns); E2B's shapes (H 1536, P 256; qkv 2560 rows); a layer
// scalar; each kind of input.
const Case kCases[] = {
    {WeightFormat::kF32, false, 67, 37, In::kAddNorm, 1.0f},
    {WeightFormat::kF32, false, 5, 8, In::kGelu, 1.0f},
    {WeightFormat::kF32, true, 33, 70, In::kAdd, 0.37f},
    {WeightFormat::kBF16, false, 130, 70, In::kNorm, 1.0f},
    {WeightFormat::kBF16, false, 1001, 258, In::kAddNorm, 0.37f},
    {WeightFormat::kBF16, true, 77, 130, In::kAddNorm, 1.0f},
    {WeightFormat::kQ8_0, false, 67, 96, In::kAdd, 2.0f},
    {WeightFormat::kQ8_0, false, 1536, 256, In::kGelu, 1.0f},
    {WeightFormat::kQ8_0, true, 45, 288, In::kAddNorm, 0.5f},
    {WeightFormat::kQ4_0, false, 2560, 1536, In::kAddNorm, 1.0f},
    {WeightFormat::kQ4_0, false, 3, 32, In::kNorm, 1.0f},
    {WeightFormat::kQ4_0, false, 1001, 256, In::kGelu, 1.0f},
    {WeightFormat::kQ4_0, true, 200, 1536, In::kAddNorm, 1.0f},
    {WeightFormat::kQ4_0, true, 61, 96, In::kAdd, 0.8f},
};

TEST_F(GpuMatvecNormIn, MatchesCpuAndSeparateDispatches) {
  for (const Case& c : kCases) check(c, NormInTuning{}, "default");
}

// Each subgroup's first round of weights issued before the prologue (INFER_NORM_IN_PREFETCH=1):
// the same results, also where a subgroup takes several slots (only its first slot's first
// round is prefetched) and a row takes several rounds. The smaller cases (lavapipe's time).
TEST_F(GpuMatvecNormIn, MatchesWithTheFirstRoundPrefetched) {
  NormInTuning t;
  t.prefetch = true;
  for (const Case& c : kCases) {
    if (uint64_t(c.rows) * c.cols <= 300000) check(c, t, "prefetch");
  }
  t.subgroups = 2;
  t.max_groups = 3;
  t.max_slots = 128;
  for (const Case& c : kCases) {
    if (uint64_t(c.rows) * c.cols <= 300000) check(c, t, "prefetch, 2 subgroups, 3 groups");
  }
}

// Two subgroups a workgroup and at most 3 workgroups: the matrices take several slots a subgroup
// (the grid's bound that keeps a big matrix's prologue count down). The smaller cases: lavapipe
// runs the big ones slowly.
TEST_F(GpuMatvecNormIn, MatchesWithSeveralSlotsASubgroup) {
  NormInTuning t;
  t.subgroups = 2;
  t.max_groups = 3;
  t.max_slots = 128;
  int several = 0;
  for (const Case& c : kCases) {
    if (uint64_t(c.rows) * c.cols > 300000) continue;
    std::unique_ptr<MatvecNormInOp> op =
        MatvecNormInOp::create(*ctx_, c.format, c.gate_up, c.cols, t).value();
    ASSERT_NE(op, nullptr);
    several += op->slots_for(c.rows) > 1;
    check(c, t, "2 subgroups, 3 groups");
  }
  EXPECT_GE(several, 7) << "cases that take more than one slot a subgroup";
}

// The slots grow with the rows so the grid stays within its bound, and stop at max_slots: a
// vocabulary head keeps the separate norm.
TEST_F(GpuMatvecNormIn, SlotsKeepTheGridWithinItsBound) {
  NormInTuning t;
  t.subgroups = 4;
  t.rows_per_subgroup = 4;
  t.max_groups = 512;
  t.max_slots = 8;
  std::unique_ptr<MatvecNormInOp> op =
      MatvecNormInOp::create(*ctx_, WeightFormat::kQ4_0, false, 1536, t).value();
  ASSERT_NE(op, nullptr);
  const uint32_t per_group = op->tuning().subgroups * 4;  // rows a one-slot workgroup owns
  EXPECT_EQ(op->slots_for(1), 1u);
  EXPECT_EQ(op->slots_for(int64_t(512) * per_group), 1u);
  EXPECT_EQ(op->slots_for(int64_t(512) * per_group + 1), 2u);
  EXPECT_EQ(op->slots_for(int64_t(512) * per_group * 8), 8u);
  EXPECT_EQ(op->slots_for(int64_t(512) * per_group * 8 + 1), 0u);
  GpuMatrix head;
  head.format = WeightFormat::kQ4_0;
  head.rows = 262144;
  head.cols = 1536;
  EXPECT_FALSE(op->applies(head));
  head.rows = 2560;
  EXPECT_TRUE(op->applies(head));
  head.cols = 1537;
  EXPECT_FALSE(op->applies(head)) << "wider than max_cols";
}

// Decode's chain: each step reads the stream from one buffer and writes it to the other, with
// another block output pending each time; recorded once, replayed twice (the replay starts from
// the first replay's stream). The stream after every step against the CPU.
TEST_F(GpuMatvecNormIn, StepsChainThroughTwoStreamBuffers) {
  const WeightFormat f = WeightFormat::kBF16;
  const uint32_t H = 150, R = 40;
  const int kSteps = 3, kReplays = 2;
  std::unique_ptr<MatvecNormInOp> op = MatvecNormInOp::create(*ctx_, f, false, H).value();
  ASSERT_NE(op, nullptr);
  const HostMatrix hm = random_matrix(f, R, H, 5);
  const GpuMatrix w = upload_matrix(*ctx_, hm.m, "w").value();
  const std::vector<float> x0 = random_vector(H, 6, -2.0f, 2.0f);
  std::vector<std::vector<float>> o(kSteps), w_post(kSteps);
  std::vector<Buffer> ob, wb;
  for (int k = 0; k < kSteps; ++k) {
    o[size_t(k)] = random_vector(H, 10 + k, -4.0f, 4.0f);
    w_post[size_t(k)] = random_vector(H, 20 + k, 0.5f, 1.5f);
    ob.push_back(to_device(*ctx_, o[size_t(k)], "o"));
    wb.push_back(to_device(*ctx_, w_post[size_t(k)], "w_post"));
  }
  const std::vector<float> norm_w = random_vector(H, 30, 0.5f, 1.5f);
  const Buffer nb = to_device(*ctx_, norm_w, "norm_w");
  const Buffer xs[2] = {to_device(*ctx_, x0, "x"), to_device(*ctx_, x0, "x (other)")};
  const Buffer yb = to_device(*ctx_, std::vector<float>(R, NAN), "y");
  std::unique_ptr<Recorder> rec = Recorder::create(*ctx_).value();
  ASSERT_TRUE(rec->begin(/*reusable=*/true).ok());
  for (int k = 0; k < kSteps; ++k) {
    NormIn ni;
    ni.x = Binding{&xs[k % 2]};
    ni.o = Binding{&ob[size_t(k)]};
    ni.w_post = Binding{&wb[size_t(k)]};
    ni.scale = 0.9f;
    ni.x_out = Binding{&xs[(k + 1) % 2]};
    ni.norm_w = Binding{&nb};
    ni.eps = kEps;
    ASSERT_TRUE(op->record(*rec, w, nullptr, ni, Binding{&yb}).ok());
  }
  // An odd step count leaves the stream in xs[1]; the next replay starts from xs[0]: copy back.
  rec->copy(xs[kSteps % 2], 0, xs[0], 0, H * sizeof(float));
  for (int i = 0; i < kReplays; ++i) ASSERT_TRUE(rec->submit_and_wait().ok());

  std::vector<float> want = x0, o_n(H);
  std::vector<double> mag(H);
  for (uint32_t i = 0; i < H; ++i) mag[i] = std::fabs(x0[i]);
  for (int i = 0; i < kReplays; ++i) {
    for (int k = 0; k < kSteps; ++k) {
      rms_norm(o[size_t(k)].data(), w_post[size_t(k)].data(), 1, H, kEps, o_n.data());
      for (uint32_t j = 0; j < H; ++j) {
        want[j] = (want[j] + o_n[j]) * 0.9f;
        mag[j] = (mag[j] + std::fabs(o_n[j])) * 0.9;
      }
    }
  }
  std::vector<double> tol(H);
  for (uint32_t j = 0; j < H; ++j) tol[j] = 1e-5 * (kSteps * kReplays + 1) * mag[j] + 1e-30;
  expect_within(from_device<float>(*ctx_, xs[0], H), want, tol, "stream after the replays");
  // y of the last step: W · rmsnorm(stream) · norm_w.
  std::vector<float> h(H), row(H);
  rms_norm(want.data(), norm_w.data(), 1, H, kEps, h.data());
  const std::vector<float> y = from_device<float>(*ctx_, yb, R);
  for (uint32_t r = 0; r < R; ++r) {
    dequantize_row(hm.m, r, row.data());
    double s = 0, a = 0;
    for (uint32_t j = 0; j < H; ++j) {
      s += double(row[j]) * h[j];
      a += std::fabs(double(row[j]) * h[j]);
    }
    EXPECT_NEAR(y[r], s, 1e-4 * a) << "row " << r;
  }
}

}  // namespace
}  // namespace infer::gpu
