// The integer-dot matvec (shaders/matvec_dot.comp: int8 activations, 4 x int8 dot products) vs
// the CPU's int8 contract (model/ops/matmul.h matmul_reference_q8_x): ragged shapes, the
// activations' rounding, workgroup shapes, gate-up, and the fall back to f32 activations.
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "gpu/ops/matvec.h"
#include "model/matrix.h"
#include "model/quant.h"
#include "test/gpu/gpu_test_env.h"
#include "test/gpu/host_matrix.h"
#include "test/gpu/matvec_check.h"

namespace infer::gpu {
namespace {

using GpuMatvecDot = GpuTest;

// x [T, cols] as the int8 kernels quantize it, each row through Q8_0 blocks and back (q · d,
// exact in f32).
std::vector<float> through_q8_0(const std::vector<float>& x, int64_t T, int64_t cols) {
  std::vector<float> out(x.size());
  std::vector<BlockQ8_0> xq(size_t(cols / kQK));
  for (int64_t t = 0; t < T; ++t) {
    quantize_row_q8_0(&x[size_t(t * cols)], xq.data(), cols);
    dequantize_row_q8_0(xq.data(), &out[size_t(t * cols)], cols);
  }
  return out;
}

class GpuMatvecDotShapes
    : public GpuTest,
      public ::testing::WithParamInterface<std::tuple<WeightFormat, Shape>> {};

// The f32 matvec suite's shapes (matvec_test.cpp) on the integer-dot kernel where it applies
// (and matvec.comp or the tiled kernel where not, each against its own reference).
TEST_P(GpuMatvecDotShapes, MatchesItsReference) {
  ASSERT_TRUE(ctx_->info().integer_dot_product) << "no shaderIntegerDotProduct";
  const auto [format, s] = GetParam();
  MatvecTuning on;
  on.int_dot = IntDot::kOn;
  check_matvec(*ctx_, format, s.rows, s.cols, s.T, on);
}

INSTANTIATE_TEST_SUITE_P(
    Formats, GpuMatvecDotShapes,
    ::testing::Combine(::testing::Values(WeightFormat::kQ8_0, WeightFormat::kQ4_0),
                       ::testing::ValuesIn(kMatvecShapes)),
    [](const auto& info) { return shape_name(std::get<0>(info.param), std::get<1>(info.param)); });

// The integer-dot kernel (shaders/matvec_dot.comp) on ragged shapes: columns ending mid
// 256-column group (288, 544, 800, 1056, 2080), rows ending mid workgroup, T = 2, 3, 5 ending mid
// token group, and wide rows (16384 at T = 1, 6144 for T > 1).
TEST_F(GpuMatvecDot, MatchesInt8ReferenceOnRaggedShapes) {
  // Vulkan 1.3 requires the feature: a device without it fails these tests rather than skip them.
  ASSERT_TRUE(ctx_->info().integer_dot_product) << "no shaderIntegerDotProduct";
  MatvecTuning on;
  on.int_dot = IntDot::kOn;
  const Shape shapes[] = {{1, 32, 1},   {7, 288, 1},  {33, 544, 1},   {67, 1056, 2},
                          {5, 800, 3},  {130, 2080, 5}, {3, 16384, 1}, {9, 6144, 2}};
  for (WeightFormat f : {WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
    for (const Shape& s : shapes) {
      SCOPED_TRACE(shape_name(f, s));
      const std::vector<float> x = random_vector(size_t(s.T * s.cols), uint32_t(s.cols + s.T));
      EXPECT_TRUE(check_matvec_x(*ctx_, f, s.rows, s.cols, s.T, x, on));
    }
  }
}

// x quantized by a dispatch before the product (coop_x_prep_int8) on the ragged shapes, wider rows
// (16640 at T = 1, 6400 at T = 2), the exact-half activations of QuantizesActivationsLikeTheCpu's kind,
// other workgroup shapes (1 subgroup of 3 rows; 2 of 1 row) and gate-up.
TEST_F(GpuMatvecDot, PreparedInputMatchesInt8Reference) {
  ASSERT_TRUE(ctx_->info().integer_dot_product) << "no shaderIntegerDotProduct";
  MatvecTuning on;
  on.int_dot = IntDot::kOn;
  MatvecTuning one_subgroup = on;
  one_subgroup.dot_subgroups_per_group = 1;
  one_subgroup.dot_rows_per_subgroup = 3;
  MatvecTuning one_row = on;
  one_row.dot_subgroups_per_group = 2;
  one_row.dot_rows_per_subgroup = 1;
  const Shape shapes[] = {{1, 32, 1},      {7, 288, 1},   {33, 544, 1},  {67, 1056, 2},
                          {5, 800, 3},     {130, 2080, 5}, {3, 16640, 1}, {9, 6400, 2}};
  for (WeightFormat f : {WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
    for (const Shape& s : shapes) {
      SCOPED_TRACE(shape_name(f, s));
      const std::vector<float> x = random_vector(size_t(s.T * s.cols), uint32_t(s.cols + s.T));
      EXPECT_TRUE(check_matvec_x(*ctx_, f, s.rows, s.cols, s.T, x, on));
      if (s.cols <= 2080) {
        EXPECT_TRUE(check_matvec_x(*ctx_, f, s.rows, s.cols, s.T, x, one_subgroup));
        EXPECT_TRUE(check_matvec_x(*ctx_, f, s.rows, s.cols, s.T, x, one_row));
      }
    }
    std::vector<float> halves(64);
    for (int64_t i = 0; i < 64; ++i) {
      const float v = i % 32 == 0 ? 127.0f : std::min(float((i * 37) % 255 - 127) + 0.5f, 126.5f);
      halves[size_t(i)] = i >= 32 ? std::ldexp(v, -20) : v;
    }
    EXPECT_TRUE(check_matvec_x(*ctx_, f, 9, 64, 1, halves, on));

    SCOPED_TRACE("gate-up");
    const int64_t I = 33, H = 544, T = 3;
    const HostMatrix gate = random_matrix(f, I, H, 71);
    const HostMatrix up = random_matrix(f, I, H, 72);
    const std::vector<float> x = random_vector(size_t(T * H), 73, -2.0f, 2.0f);
    for (uint32_t tokens : {1u, uint32_t(T)}) {
      auto k = create_matvec_kernels(*ctx_, f, /*gate_up=*/true, on);
      ASSERT_TRUE(k.ok()) << k.error().message;
      ASSERT_TRUE(k->dot_one_token != nullptr);
      ASSERT_TRUE(activations_in_int8(*k, I, H, tokens));
      const std::vector<float> act = run_gate_up(*ctx_, *k, gate.m, up.m, x, tokens);
      expect_gate_up_matches(gate.m, up.m, through_q8_0(x, tokens, H), tokens, act);
    }
  }
}

// IntDot::kOff (the default) takes matvec.comp with f32 activations (checked against
// matmul_reference's tighter bound), at any width.
TEST_F(GpuMatvecDot, FallsBackToF32Activations) {
  MatvecTuning off;
  off.int_dot = IntDot::kOff;
  for (WeightFormat f : {WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
    const std::vector<float> x = random_vector(size_t(2 * 6400), 11);
    EXPECT_FALSE(check_matvec_x(*ctx_, f, 5, 544, 1, x, off));
    EXPECT_FALSE(check_matvec_x(*ctx_, f, 5, 6400, 2, x, {}));
    const std::vector<float> wide = random_vector(16640, 12);
    EXPECT_FALSE(check_matvec_x(*ctx_, f, 3, 16640, 1, wide, {}));
  }
}

// Activations whose scaled values are exact halves (amax 127 -> d = 1; amax 127 · 2^-20 -> d =
// 2^-20, a subnormal f16 scale): the GPU must round them away from zero like roundf, not to even,
// and keep d exact; a quant off by one breaks the tolerance at 96 columns. Plus blocks of zeros.
TEST_F(GpuMatvecDot, QuantizesActivationsLikeTheCpu) {
  ASSERT_TRUE(ctx_->info().integer_dot_product) << "no shaderIntegerDotProduct";
  MatvecTuning on;
  on.int_dot = IntDot::kOn;
  const int64_t cols = 96, T = 2;
  std::vector<float> x(size_t(T * cols));
  for (int64_t i = 0; i < T * cols; ++i) {
    const int64_t block = i / 32, k = i % 32;
    const float half = float((k * 37) % 255 - 127) + 0.5f;  // -126.5 .. 127.5, capped below
    float v = k == 0 ? 127.0f : std::min(half, 126.5f);
    if (block % 3 == 1) v = std::ldexp(v, -20);
    if (block % 3 == 2 && block > 2) v = 0.0f;
    x[size_t(i)] = v;
  }
  for (WeightFormat f : {WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
    SCOPED_TRACE(weight_format_name(f));
    EXPECT_TRUE(check_matvec_x(*ctx_, f, 9, cols, 1, x, on));
    EXPECT_TRUE(check_matvec_x(*ctx_, f, 9, cols, T, x, on));
  }
}

// Other integer-dot workgroup shapes: one subgroup of 3 rows, 2 subgroups of 1 row, 3 tokens.
TEST_F(GpuMatvecDot, MatchesInt8ReferenceForOtherWorkgroupShapes) {
  ASSERT_TRUE(ctx_->info().integer_dot_product) << "no shaderIntegerDotProduct";
  for (WeightFormat f : {WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
    MatvecTuning a{0, 3, 3};
    a.int_dot = IntDot::kOn;
    a.dot_subgroups_per_group = 1;
    MatvecTuning b{0, 1, 2};
    b.int_dot = IntDot::kOn;
    b.dot_subgroups_per_group = 2;
    const std::vector<float> x = random_vector(size_t(7 * 640), 13);
    EXPECT_TRUE(check_matvec_x(*ctx_, f, 100, 640, 1, x, a));
    EXPECT_TRUE(check_matvec_x(*ctx_, f, 100, 640, 7, x, a));
    EXPECT_TRUE(check_matvec_x(*ctx_, f, 51, 320, 3, x, b));
  }
}

// The gate-up variant (gelu(G·x) ⊙ (U·x), gpu/ops/mlp.h's decode path) against the CPU on x as
// the kernel quantizes it (q · d per block, exact in f32), with expect_gate_up_matches's bound.
TEST_F(GpuMatvecDot, GateUpMatchesInt8Reference) {
  ASSERT_TRUE(ctx_->info().integer_dot_product) << "no shaderIntegerDotProduct";
  MatvecTuning on;
  on.int_dot = IntDot::kOn;
  struct GateUpShape {
    int64_t I, H, T;
  };
  for (WeightFormat f : {WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
    for (const GateUpShape s : {GateUpShape{7, 288, 1}, GateUpShape{33, 544, 3},
                                GateUpShape{130, 1056, 1}, GateUpShape{64, 2080, 5}}) {
      SCOPED_TRACE(std::string(weight_format_name(f)) + " I " + std::to_string(s.I) + " H " +
                   std::to_string(s.H) + " T " + std::to_string(s.T));
      const HostMatrix gate = random_matrix(f, s.I, s.H, uint32_t(s.I * 131 + s.H));
      const HostMatrix up = random_matrix(f, s.I, s.H, uint32_t(s.I * 137 + s.H + 1));
      const std::vector<float> x =
          random_vector(size_t(s.T * s.H), uint32_t(s.H + s.T), -2.0f, 2.0f);
      auto k = create_matvec_kernels(*ctx_, f, /*gate_up=*/true, on);
      ASSERT_TRUE(k.ok()) << k.error().message;
      ASSERT_TRUE(activations_in_int8(*k, s.I, s.H, uint32_t(s.T)));
      const std::vector<float> act = run_gate_up(*ctx_, *k, gate.m, up.m, x, s.T);
      expect_gate_up_matches(gate.m, up.m, through_q8_0(x, s.T, s.H), s.T, act);
    }
  }
}

// Prompt-sized T with integer dots on: prefill does not quantize activations. Where the device has
// cooperative matrices it takes f16 operands (matmul_coopmat.comp, matvec_check.h's f16 bound),
// elsewhere the f32 tiled kernel runs and meets the f32 contract. Plain and gate-up, rows ending
// mid tile, tokens mid token tile, columns of whole 64-column steps.
TEST_F(GpuMatvecDot, PrefillTakesUnquantizedActivationsWithIntegerDotsOn) {
  ASSERT_TRUE(ctx_->info().integer_dot_product) << "no shaderIntegerDotProduct";
  MatvecTuning on;
  on.int_dot = IntDot::kOn;
  struct PrefillShape {
    int64_t rows, cols, T;
  };
  for (WeightFormat f : {WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
    for (const PrefillShape s : {PrefillShape{200, 320, 100}, PrefillShape{64, 1024, 64}}) {
      SCOPED_TRACE(std::string(weight_format_name(f)) + " rows " + std::to_string(s.rows) +
                   " cols " + std::to_string(s.cols) + " T " + std::to_string(s.T));
      const std::vector<float> x =
          random_vector(size_t(s.T * s.cols), uint32_t(s.cols + s.T), -2.0f, 2.0f);
      auto plain = create_matvec_kernels(*ctx_, f, /*gate_up=*/false, on);
      ASSERT_TRUE(plain.ok()) << plain.error().message;
      EXPECT_FALSE(activations_in_int8(*plain, s.rows, s.cols, uint32_t(s.T)));
      EXPECT_FALSE(check_matvec_x(*ctx_, f, s.rows, s.cols, s.T, x, on));

      const HostMatrix gate = random_matrix(f, s.rows, s.cols, uint32_t(s.rows * 131 + s.cols));
      const HostMatrix up = random_matrix(f, s.rows, s.cols, uint32_t(s.rows * 137 + s.cols));
      auto k = create_matvec_kernels(*ctx_, f, /*gate_up=*/true, on);
      ASSERT_TRUE(k.ok()) << k.error().message;
      EXPECT_FALSE(activations_in_int8(*k, s.rows, s.cols, uint32_t(s.T)));
      const std::vector<float> act = run_gate_up(*ctx_, *k, gate.m, up.m, x, s.T);
      const bool f16 = products_in_f16(*k, s.rows, s.cols, uint32_t(s.T));
      expect_gate_up_matches(gate.m, up.m, x, s.T, act, f16 ? std::ldexp(1.0, -10) : 0.0);
    }
  }
}

}  // namespace
}  // namespace infer::gpu
