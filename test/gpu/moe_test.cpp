// GPU MoE ops vs a CPU reference built from the model's ops as model/forward_moe.cpp uses them
// (rms_norm, matmul_reference, softmax, gelu_mul; GEMMA4_TEXT.md §4.9): routing (indices exact,
// ties to the lower index, weights within a derived tolerance), the routed experts for every format
// on the same bytes, and both in one recording with no readback.
#include "gpu/ops/moe.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu/context.h"
#include "model/forward_blocks.h"
#include "model/matrix.h"
#include "model/ops/gelu.h"
#include "model/ops/matmul.h"
#include "model/ops/rms_norm.h"
#include "model/ops/softmax.h"
#include "test/gpu/gpu_test_env.h"
#include "test/gpu/host_matrix.h"
#include "test/gpu/moe_reference.h"

namespace infer::gpu {
namespace {

constexpr float kEps = kMoeEps;

// ---- GPU side -----------------------------------------------------------------------------

Buffer device_buffer(const VulkanContext& ctx, const void* data, size_t bytes, const char* name) {
  auto b = Buffer::create(ctx, std::max<size_t>(bytes, 4), BufferKind::kDevice, name);
  EXPECT_TRUE(b.ok()) << b.error().message;
  if (!b.ok()) return Buffer();
  if (data != nullptr) {
    EXPECT_TRUE(upload(ctx, *b, 0, data, bytes).ok());
  }
  return std::move(*b);
}

template <class T>
std::vector<T> read_back(const VulkanContext& ctx, const Buffer& b, size_t n) {
  std::vector<T> v(n);
  EXPECT_TRUE(download(ctx, b, 0, v.data(), n * sizeof(T)).ok());
  return v;
}

struct Problem {
  int64_t T, H, E, k, I;
};

std::string name(const Problem& p) {
  return "T " + std::to_string(p.T) + " H " + std::to_string(p.H) + " E " + std::to_string(p.E) +
         " k " + std::to_string(p.k) + " I " + std::to_string(p.I);
}

MoeDims dims(const Problem& p) {
  MoeDims d;
  d.T = uint32_t(p.T);
  d.H = uint32_t(p.H);
  d.E = uint32_t(p.E);
  d.k = uint32_t(p.k);
  d.I = uint32_t(p.I);
  d.eps = kEps;
  return d;
}

// Router inputs of one problem: x in [-2, 2), scale in [0.5, 1.5), per-expert scale in [0.5, 2),
// router rows in [-1, 1) (logits spread enough that the top k are well separated).
struct RouterInputs {
  std::vector<float> x, scale, per_expert;
  HostMatrix router;
};

RouterInputs router_inputs(const Problem& p, WeightFormat f, uint32_t seed) {
  RouterInputs in;
  in.x = random_vector(size_t(p.T * p.H), seed, -2.0f, 2.0f);
  in.scale = random_vector(size_t(p.H), seed + 1, 0.5f, 1.5f);
  in.per_expert = random_vector(size_t(p.E), seed + 2, 0.5f, 2.0f);
  in.router = random_matrix(f, p.E, p.H, seed + 3);
  return in;
}

// Runs route() and returns idx, w.
std::pair<std::vector<uint32_t>, std::vector<float>> run_route(const VulkanContext& ctx,
                                                               const Problem& p,
                                                               const RouterInputs& in) {
  auto op = MoeOps::create(ctx, WeightFormat::kF32, uint32_t(p.T), uint32_t(p.k), uint32_t(p.I),
                           uint32_t(p.E));
  EXPECT_TRUE(op.ok()) << op.error().message;
  auto router = upload_matrix(ctx, in.router.m, "router");
  EXPECT_TRUE(router.ok());
  if (!op.ok() || !router.ok()) return {};
  Buffer x = device_buffer(ctx, in.x.data(), in.x.size() * 4, "x");
  Buffer scale = device_buffer(ctx, in.scale.data(), in.scale.size() * 4, "router scale");
  Buffer per = device_buffer(ctx, in.per_expert.data(), in.per_expert.size() * 4, "per expert");
  Buffer idx = device_buffer(ctx, nullptr, size_t(p.T * p.k) * 4, "idx");
  Buffer w = device_buffer(ctx, nullptr, size_t(p.T * p.k) * 4, "w");
  auto rec = Recorder::create(ctx);
  EXPECT_TRUE(rec.ok());
  if (!rec.ok()) return {};
  EXPECT_TRUE((*rec)->begin().ok());
  auto r = (*op)->route(**rec, dims(p), Binding{&x}, Binding{&scale}, *router, Binding{&per},
                        Binding{&idx}, Binding{&w});
  EXPECT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE((*rec)->submit_and_wait().ok());
  return {read_back<uint32_t>(ctx, idx, size_t(p.T * p.k)),
          read_back<float>(ctx, w, size_t(p.T * p.k))};
}

void expect_routing(const Routing& want, const std::vector<uint32_t>& idx,
                    const std::vector<float>& w) {
  ASSERT_EQ(idx.size(), want.idx.size());
  int bad = 0;
  for (size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] != uint32_t(want.idx[i]) && ++bad <= 5) {
      ADD_FAILURE() << "idx[" << i << "] = " << idx[i] << ", reference " << want.idx[i];
    }
    if (!(std::fabs(w[i] - want.w[i]) <= want.w_tol[i]) && ++bad <= 5) {
      ADD_FAILURE() << "w[" << i << "] = " << w[i] << ", reference " << want.w[i] << ", tolerance "
                    << want.w_tol[i];
    }
  }
  EXPECT_EQ(bad, 0);
}

using GpuMoe = GpuTest;

// Router rows f32 and bf16 (odd H for bf16's 16-bit path); k = 1 up to E's 8 of 128.
TEST_F(GpuMoe, RouteMatchesCpuReference) {
  const Problem problems[] = {{1, 64, 8, 2, 32},
                              {5, 96, 16, 4, 32},
                              {3, 257, 128, 8, 32},
                              {70, 128, 32, 1, 32},
                              {256, 64, 16, 8, 32}};
  for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kBF16}) {
    for (const Problem& p : problems) {
      SCOPED_TRACE(std::string(weight_format_name(f)) + " " + name(p));
      const RouterInputs in = router_inputs(p, f, uint32_t(p.T * 17 + p.E));
      const Routing want = route_reference(in.x, in.router.m, in.scale, in.per_expert, p.T, p.k);
      const auto [idx, w] = run_route(*ctx_, p, in);
      expect_routing(want, idx, w);
    }
  }
}

// Equal probabilities go to the lower index: router rows are multiples c_e of one row, so the
// logits are c_e · L exactly in both orders; rows 3 and 6 tie for first, the rest tie at 0.
TEST_F(GpuMoe, RouteBreaksTiesTowardTheLowerIndex) {
  const Problem p{2, 64, 8, 5, 32};
  RouterInputs in = router_inputs(p, WeightFormat::kF32, 7);
  const float c[8] = {0, 0.5f, 0, 1, 0, 0, 1, 0};
  std::vector<float> rows(size_t(p.E * p.H));
  for (int64_t e = 0; e < p.E; ++e) {
    for (int64_t h = 0; h < p.H; ++h) rows[size_t(e * p.H + h)] = c[e] * float(h % 5) * 0.5f;
  }
  in.x.assign(in.x.size(), 1.0f);  // logits c_e · L with L > 0
  in.router = host_matrix(WeightFormat::kF32, p.E, p.H, rows.data());
  const auto [idx, w] = run_route(*ctx_, p, in);
  const std::vector<uint32_t> want = {3, 6, 1, 0, 2, 3, 6, 1, 0, 2};
  EXPECT_EQ(idx, want);
  const Routing ref = route_reference(in.x, in.router.m, in.scale, in.per_expert, p.T, p.k);
  expect_routing(ref, idx, w);
}

Experts random_experts(WeightFormat f, const Problem& p, uint32_t seed) {
  Experts ex;
  for (int64_t e = 0; e < p.E; ++e) {
    ex.gate_up.push_back(random_matrix(f, 2 * p.I, p.H, seed + uint32_t(2 * e)));
    ex.down.push_back(random_matrix(f, p.H, p.I, seed + uint32_t(2 * e + 1)));
  }
  return ex;
}

// k distinct experts per token (tokens share experts), weights in [0.1, 1).
Routing random_routing(const Problem& p, uint32_t seed) {
  std::mt19937 rng(seed);
  Routing r;
  std::vector<int32_t> all(static_cast<size_t>(p.E));
  for (int64_t e = 0; e < p.E; ++e) all[size_t(e)] = int32_t(e);
  for (int64_t t = 0; t < p.T; ++t) {
    std::shuffle(all.begin(), all.end(), rng);
    r.idx.insert(r.idx.end(), all.begin(), all.begin() + p.k);
  }
  r.w = random_vector(size_t(p.T * p.k), seed + 1, 0.1f, 1.0f);
  r.w_tol.assign(r.w.size(), 0.0f);  // given exactly
  return r;
}

void check_experts(const VulkanContext& ctx, WeightFormat f, const Problem& p) {
  SCOPED_TRACE(std::string(weight_format_name(f)) + " " + name(p));
  const Experts ex = random_experts(f, p, uint32_t(p.E * 31 + p.H));
  const Routing r = random_routing(p, uint32_t(p.T + p.k));
  const std::vector<float> x2 = random_vector(size_t(p.T * p.H), uint32_t(p.H), -2.0f, 2.0f);
  std::vector<float> want;
  std::vector<double> tol;
  experts_reference(ex, x2, r, p.T, p.k, &want, &tol);

  auto op = MoeOps::create(ctx, f, uint32_t(p.T), uint32_t(p.k), uint32_t(p.I), uint32_t(p.E));
  ASSERT_TRUE(op.ok()) << op.error().message;
  auto gate_up = upload_experts(ctx, matrices(ex.gate_up), "gate_up");
  auto down = upload_experts(ctx, matrices(ex.down), "down");
  ASSERT_TRUE(gate_up.ok() && down.ok());
  const std::vector<uint32_t> idx_u(r.idx.begin(), r.idx.end());
  Buffer x = device_buffer(ctx, x2.data(), x2.size() * 4, "x2");
  Buffer idx = device_buffer(ctx, idx_u.data(), idx_u.size() * 4, "idx");
  Buffer w = device_buffer(ctx, r.w.data(), r.w.size() * 4, "w");
  Buffer out = device_buffer(ctx, nullptr, want.size() * 4, "out");
  auto rec = Recorder::create(ctx);
  ASSERT_TRUE(rec.ok());
  ASSERT_TRUE((*rec)->begin().ok());
  auto res = (*op)->experts(**rec, dims(p), Binding{&x}, *gate_up, *down, Binding{&idx},
                            Binding{&w}, Binding{&out});
  ASSERT_TRUE(res.ok()) << res.error().message;
  ASSERT_TRUE((*rec)->submit_and_wait().ok());
  const std::vector<float> got = read_back<float>(ctx, out, want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(double(got[i]) - want[i]) <= tol[i]) && ++bad <= 5) {
      ADD_FAILURE() << "out[" << i << "] = " << got[i] << ", reference " << want[i]
                    << ", tolerance " << tol[i];
    }
  }
  EXPECT_EQ(bad, 0) << "of " << got.size() << " outputs";
}

// Rows of I and H not a multiple of the 2-row workgroups; k from 1 to 8; quantized widths a
// multiple of 32.
TEST_F(GpuMoe, ExpertsMatchCpuReference) {
  const Problem problems[] = {
      {1, 64, 4, 2, 32}, {3, 96, 8, 3, 64}, {17, 160, 16, 8, 96}, {2, 32, 5, 1, 32}};
  for (WeightFormat f :
       {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
    for (const Problem& p : problems) check_experts(*ctx_, f, p);
  }
}

// Odd H and I: bf16's last unit reaches past the row in both halves.
TEST_F(GpuMoe, ExpertsTakeOddWidthsForF32AndBf16) {
  for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kBF16}) {
    check_experts(*ctx_, f, {3, 33, 6, 2, 17});
    check_experts(*ctx_, f, {1, 65, 4, 4, 1});
  }
}

// The decode shape: route, then experts, in one recording; the expert ids never leave the GPU.
TEST_F(GpuMoe, RouteThenExpertsInOneRecording) {
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kQ4_0}) {
    const Problem p{4, 128, 16, 4, 64};
    SCOPED_TRACE(std::string(weight_format_name(f)) + " " + name(p));
    const RouterInputs in = router_inputs(p, WeightFormat::kBF16, 99);
    const Experts ex = random_experts(f, p, 5);
    const std::vector<float> x2 = random_vector(size_t(p.T * p.H), 11, -2.0f, 2.0f);
    const Routing r = route_reference(in.x, in.router.m, in.scale, in.per_expert, p.T, p.k);
    std::vector<float> want;
    std::vector<double> tol;
    experts_reference(ex, x2, r, p.T, p.k, &want, &tol);

    auto op = MoeOps::create(*ctx_, f, uint32_t(p.T), uint32_t(p.k), uint32_t(p.I), uint32_t(p.E));
    ASSERT_TRUE(op.ok()) << op.error().message;
    auto router = upload_matrix(*ctx_, in.router.m, "router");
    auto gate_up = upload_experts(*ctx_, matrices(ex.gate_up), "gate_up");
    auto down = upload_experts(*ctx_, matrices(ex.down), "down");
    ASSERT_TRUE(router.ok() && gate_up.ok() && down.ok());
    Buffer x = device_buffer(*ctx_, in.x.data(), in.x.size() * 4, "x");
    Buffer x2b = device_buffer(*ctx_, x2.data(), x2.size() * 4, "x2");
    Buffer scale = device_buffer(*ctx_, in.scale.data(), in.scale.size() * 4, "router scale");
    Buffer per = device_buffer(*ctx_, in.per_expert.data(), in.per_expert.size() * 4, "per");
    Buffer idx = device_buffer(*ctx_, nullptr, size_t(p.T * p.k) * 4, "idx");
    Buffer w = device_buffer(*ctx_, nullptr, size_t(p.T * p.k) * 4, "w");
    Buffer out = device_buffer(*ctx_, nullptr, want.size() * 4, "out");
    auto rec = Recorder::create(*ctx_);
    ASSERT_TRUE(rec.ok());
    ASSERT_TRUE((*rec)->begin().ok());
    ASSERT_TRUE((*op)
                    ->route(**rec, dims(p), Binding{&x}, Binding{&scale}, *router, Binding{&per},
                            Binding{&idx}, Binding{&w})
                    .ok());
    ASSERT_TRUE((*op)
                    ->experts(**rec, dims(p), Binding{&x2b}, *gate_up, *down, Binding{&idx},
                              Binding{&w}, Binding{&out})
                    .ok());
    ASSERT_TRUE((*rec)->submit_and_wait().ok());
    EXPECT_EQ((*rec)->dispatch_count(), 4);  // router, top-k, gate-up, down
    const std::vector<float> got = read_back<float>(*ctx_, out, want.size());
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (!(std::fabs(double(got[i]) - want[i]) <= tol[i]) && ++bad <= 5) {
        ADD_FAILURE() << "out[" << i << "] = " << got[i] << ", reference " << want[i]
                      << ", tolerance " << tol[i];
      }
    }
    EXPECT_EQ(bad, 0);
  }
}

TEST_F(GpuMoe, UploadExpertsRejectsMismatchedExperts) {
  const HostMatrix a = random_matrix(WeightFormat::kF32, 4, 32, 1);
  const HostMatrix b = random_matrix(WeightFormat::kF32, 5, 32, 2);
  const std::vector<Matrix> ms = {a.m, b.m};
  auto g = upload_experts(*ctx_, ms, "bad");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().code, ErrorCode::kShape);
}

}  // namespace
}  // namespace infer::gpu
