// GPU gate-up (gelu(gate · x) ⊙ (up · x)) vs the CPU reference (model/ops/matmul.h and
// model/ops/gelu.h) for every weight format, on the same weight bytes: the matvec kernels for small
// T, the tiled kernel for T = 64 and 256, ragged rows and tiles, odd f32/bf16 columns.
#include "gpu/ops/mlp.h"

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <cmath>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "gpu/context.h"
#include "model/matrix.h"
#include "model/ops/gelu.h"
#include "model/ops/matmul.h"
#include "test/gpu/gpu_test_env.h"
#include "test/gpu/host_matrix.h"
#include "test/gpu/matvec_check.h"  // expect_gate_up_matches

namespace infer::gpu {
namespace {

// Runs the op end to end: act [T, I] for gate, up [I, H] and x [T, H].
std::vector<float> run_gate_up(const VulkanContext& ctx, const GateUpOp& op, const GpuMatrix& gate,
                               const GpuMatrix& up, const std::vector<float>& x, int64_t T) {
  std::vector<float> act(size_t(T * gate.rows), NAN);
  auto xb = Buffer::create(ctx, x.size() * 4, BufferKind::kDevice, "x");
  auto ab = Buffer::create(ctx, act.size() * 4, BufferKind::kDevice, "act");
  EXPECT_TRUE(xb.ok() && ab.ok());
  if (!xb.ok() || !ab.ok()) return act;
  EXPECT_TRUE(upload(ctx, *xb, 0, x.data(), x.size() * 4).ok());
  auto rec = Recorder::create(ctx);
  EXPECT_TRUE(rec.ok());
  if (!rec.ok()) return act;
  EXPECT_TRUE((*rec)->begin().ok());
  auto r = op.record(**rec, gate, up, Binding{&*xb}, Binding{&*ab}, uint32_t(T));
  EXPECT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE((*rec)->submit_and_wait().ok());
  EXPECT_TRUE(download(ctx, *ab, 0, act.data(), act.size() * 4).ok());
  return act;
}

void check_gate_up(const VulkanContext& ctx, WeightFormat format, int64_t I, int64_t H, int64_t T) {
  SCOPED_TRACE(std::string(weight_format_name(format)) + " I " + std::to_string(I) + " H " +
               std::to_string(H) + " T " + std::to_string(T));
  const HostMatrix gate = random_matrix(format, I, H, uint32_t(I * 131 + H));
  const HostMatrix up = random_matrix(format, I, H, uint32_t(I * 137 + H + 1));
  // Activations in [-2, 2): gate sums then reach the curved part of gelu and its negative tail.
  const std::vector<float> x = random_vector(size_t(T * H), uint32_t(H + T), -2.0f, 2.0f);
  auto g = upload_matrix(ctx, gate.m, "gate");
  auto u = upload_matrix(ctx, up.m, "up");
  ASSERT_TRUE(g.ok() && u.ok());
  auto op = GateUpOp::create(ctx, format);
  ASSERT_TRUE(op.ok()) << op.error().message;
  const std::vector<float> act = run_gate_up(ctx, **op, *g, *u, x, T);

  // The bound of test/gpu/matvec_check.h; on the cooperative-matrix kernel each product is also
  // within 2^-10 of itself (f16 inputs).
  expect_gate_up_matches(gate.m, up.m, x, T, act,
                         (*op)->products_in_f16(I, H, uint32_t(T)) ? std::ldexp(1.0, -10) : 0.0);
}

struct GateUpShape {
  int64_t I, H, T;
};

void PrintTo(const GateUpShape& s, std::ostream* os) {
  *os << "I " << s.I << " H " << s.H << " T " << s.T;
}

class GpuGateUp : public GpuTest,
                  public ::testing::WithParamInterface<std::tuple<WeightFormat, GateUpShape>> {};

TEST_P(GpuGateUp, MatchesCpuReference) {
  const auto [format, s] = GetParam();
  check_gate_up(*ctx_, format, s.I, s.H, s.T);
}

// T = 1, 2, 5: matvec kernels with partial row and token groups; T = 64 and 256: the tiled kernel
// with partial row tiles (130, 65, 1 rows) and 96-column rows (a 32-column step past 64).
const GateUpShape kShapes[] = {{1, 32, 1},    {7, 64, 2},  {33, 96, 5},    {130, 256, 64},
                         {65, 96, 256}, {1, 64, 64}, {512, 1536, 1}, {96, 512, 256}};

INSTANTIATE_TEST_SUITE_P(
    Formats, GpuGateUp,
    ::testing::Combine(::testing::Values(WeightFormat::kF32, WeightFormat::kBF16,
                                         WeightFormat::kQ8_0, WeightFormat::kQ4_0),
                       ::testing::ValuesIn(kShapes)),
    [](const auto& info) {
      std::string n = weight_format_name(std::get<0>(info.param));
      n[0] = char(std::toupper(n[0]));
      n.erase(std::remove(n.begin(), n.end(), '_'), n.end());
      const GateUpShape& s = std::get<1>(info.param);
      return n + "I" + std::to_string(s.I) + "H" + std::to_string(s.H) + "T" + std::to_string(s.T);
    });

using GpuGateUpOp = GpuTest;

// Odd H for f32 and bf16 through both kernels: bf16's last unit reaches past the row.
TEST_F(GpuGateUpOp, TakesOddColumnsForF32AndBf16) {
  for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kBF16}) {
    check_gate_up(*ctx_, f, 9, 33, 1);
    check_gate_up(*ctx_, f, 17, 1023, 5);
    check_gate_up(*ctx_, f, 70, 95, 64);
    check_gate_up(*ctx_, f, 3, 1, 256);
  }
}

// Large gate sums: gelu's tails (≈ z for z >> 0, ≈ 0 for z << 0) must not overflow to NaN.
TEST_F(GpuGateUpOp, LargeGateSumsStayFinite) {
  for (int64_t T : {1, 64}) {
    const int64_t I = 8, H = 64;
    std::vector<float> gv(size_t(I * H)), uv(size_t(I * H), 0.5f);
    for (int64_t i = 0; i < I; ++i) {
      for (int64_t c = 0; c < H; ++c) gv[size_t(i * H + c)] = (i % 2 ? -1.0f : 1.0f) * (1 + i);
    }
    const HostMatrix gate = host_matrix(WeightFormat::kF32, I, H, gv.data());
    const HostMatrix up = host_matrix(WeightFormat::kF32, I, H, uv.data());
    const std::vector<float> x(size_t(T * H), 10.0f);  // gate sums ±640·(1 + i)
    auto g = upload_matrix(*ctx_, gate.m, "gate");
    auto u = upload_matrix(*ctx_, up.m, "up");
    ASSERT_TRUE(g.ok() && u.ok());
    auto op = GateUpOp::create(*ctx_, WeightFormat::kF32);
    ASSERT_TRUE(op.ok());
    const std::vector<float> act = run_gate_up(*ctx_, **op, *g, *u, x, T);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < I; ++i) {
        const float z = 640.0f * float(1 + i) * (i % 2 ? -1.0f : 1.0f);
        const float want = z > 0 ? z * 320.0f : 0.0f;  // up sum = 0.5 · 10 · 64
        EXPECT_NEAR(act[size_t(t * I + i)], want, 1e-5f * std::fabs(want))
            << "t " << t << " i " << i;
      }
    }
  }
}

}  // namespace
}  // namespace infer::gpu
