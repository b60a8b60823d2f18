// GPU tiled matmul (shaders/matmul.comp), plain and gate-up, vs the CPU reference
// (model/ops/matmul.h, model/ops/gelu.h) for every weight format and several tile shapes, forced
// for every T: ragged rows, columns and tokens against each tile. Plus the tile checks of
// gpu/ops/matvec.cpp (shapes the shader cannot run, the INFER_MM_* knobs).
#include <algorithm>
#include <cctype>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "gpu/context.h"
#include "gpu/ops/matvec.h"
#include "gpu/recorder.h"
#include "model/matrix.h"
#include "model/ops/gelu.h"
#include "model/ops/matmul.h"
#include "test/gpu/gpu_test_env.h"
#include "test/gpu/host_matrix.h"
#include "test/gpu/matvec_check.h"  // Shape, expect_gate_up_matches

namespace infer::gpu {
namespace {

// A tile setting, forced for every T (matmul_min_tokens = matmul_min_groups = 1), the big tile
// for every grid (tile_min_groups = 1) unless `quarter` asks for the quarter tile throughout.
MatvecTuning tile(uint32_t rows, uint32_t tokens, uint32_t thread_rows, uint32_t thread_tokens,
                  uint32_t stages, bool quarter = false) {
  MatvecTuning t;
  t.tile_rows = rows;
  t.tile_tokens = tokens;
  t.thread_rows = thread_rows;
  t.thread_tokens = thread_tokens;
  t.tile_stages = stages;
  t.matmul_min_tokens = 1;
  t.matmul_min_groups = 1;
  t.tile_min_groups = quarter ? UINT32_MAX : 1;
  return t;
}

struct Tile {
  const char* name;
  MatvecTuning tuning;
  bool quarter = false;  // the product runs on MatvecKernels::tiled_small
};

void PrintTo(const Tile& t, std::ostream* os) { *os << t.name; }

// Each fits lavapipe (32 KB of shared memory) for gate-up too. Default: the device's (128 x 128 by
// 8 x 8, gate-up 64 x 128 by 4 x 8, one buffer); DefaultQuarter its quarter tile (64 x 64 by
// 4 x 4, both). 32 x 64 by 4 x 8, two buffers: the double-
// buffered loop, tokens wider than rows. 96 x 32 by 8 x 4: 96 invocations, so x's staging (1024
// floats) leaves the last pass partial, and row tiles that are not powers of two. 16 x 16 by 4 x 4:
// 16 invocations, the narrowest XOR swizzle (4 vec4s a column).
const Tile kTiles[] = {{"Default", tile(0, 0, 0, 0, 0)},
                       {"DefaultQuarter", tile(0, 0, 0, 0, 0, true), true},
                       {"Tile32x64By4x8TwoStages", tile(32, 64, 4, 8, 2)},
                       {"Tile96x32By8x4", tile(96, 32, 8, 4, 1)},
                       {"Tile16x16By4x4TwoStages", tile(16, 16, 4, 4, 2)}};

// The kernels of one family with the cooperative-matrix path dropped, so the f32 tiled kernel runs
// wherever the device has cooperative matrices too.
MatvecKernels tiled_kernels(const VulkanContext& ctx, WeightFormat f, bool gate_up,
                            const MatvecTuning& t) {
  auto k = create_matvec_kernels(ctx, f, gate_up, t);
  EXPECT_TRUE(k.ok()) << k.error().message;
  if (!k.ok()) return {};
  k->coop.reset();
  return std::move(*k);
}

// y [T, w.rows] (or act for gate-up) from the kernels on x [T, w.cols].
std::vector<float> run(const VulkanContext& ctx, const MatvecKernels& k, const HostMatrix& w,
                       const HostMatrix* up, const std::vector<float>& x, int64_t T) {
  std::vector<float> y(size_t(T * w.m.rows), NAN);
  auto gw = upload_matrix(ctx, w.m, "w");
  auto gu = up != nullptr ? upload_matrix(ctx, up->m, "up") : upload_matrix(ctx, w.m, "unused");
  auto xb = Buffer::create(ctx, x.size() * 4, BufferKind::kDevice, "x");
  auto yb = Buffer::create(ctx, y.size() * 4, BufferKind::kDevice, "y");
  EXPECT_TRUE(gw.ok() && gu.ok() && xb.ok() && yb.ok());
  if (!gw.ok() || !gu.ok() || !xb.ok() || !yb.ok()) return y;
  EXPECT_TRUE(upload(ctx, *xb, 0, x.data(), x.size() * 4).ok());
  auto rec = Recorder::create(ctx);
  EXPECT_TRUE(rec.ok());
  if (!rec.ok()) return y;
  EXPECT_TRUE((*rec)->begin().ok());
  auto r = record_matvec_kernels(**rec, k, *gw, up != nullptr ? &*gu : nullptr, Binding{&*xb},
                                 Binding{&*yb}, uint32_t(T));
  EXPECT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE((*rec)->submit_and_wait().ok());
  EXPECT_TRUE(download(ctx, *yb, 0, y.data(), y.size() * 4).ok());
  return y;
}

// Sum of |w[r, c] · x[c]| over c: the scale of a dot product's rounding error.
double abs_dot(const std::vector<float>& row, const float* x) {
  double s = 0;
  for (size_t c = 0; c < row.size(); ++c) s += std::fabs(double(row[c]) * x[c]);
  return s;
}

// The reference sums in double, the GPU in f32, one running sum per output over the columns in
// order. Each f32 addition errs by at most eps/2 of the running magnitude, bounded by
// S = sum_c |w_rc · x_tc|; n roundings add up like a random walk, ~sqrt(n) · eps/2 · S; weights
// decode exactly (bf16 shifts, d · q in f32 on both sides). 8x margin (test/gpu/matvec_test.cpp).
double sum_tol(int64_t cols) { return 8.0 * FLT_EPSILON * std::sqrt(double(cols)); }

void check_plain(const VulkanContext& ctx, const MatvecKernels& k, int64_t rows, int64_t cols,
                 int64_t T) {
  SCOPED_TRACE("rows " + std::to_string(rows) + " cols " + std::to_string(cols) + " T " +
               std::to_string(T));
  ASSERT_FALSE(runs_matvec_shader(k, rows, cols, uint32_t(T)));
  ASSERT_FALSE(activations_in_int8(k, rows, cols, uint32_t(T)));
  const HostMatrix w = random_matrix(k.format, rows, cols, uint32_t(rows * 7919 + cols));
  const std::vector<float> x = random_vector(size_t(T * cols), uint32_t(cols + T));
  const std::vector<float> y = run(ctx, k, w, nullptr, x, T);
  std::vector<float> ref(y.size()), row(static_cast<size_t>(cols));
  matmul_reference(w.m, x.data(), T, ref.data());
  int bad = 0;
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(w.m, r, row.data());
    for (int64_t t = 0; t < T; ++t) {
      const size_t o = size_t(t * rows + r);
      const double tol = sum_tol(cols) * abs_dot(row, &x[size_t(t * cols)]) + 1e-30;
      if (!(std::fabs(double(y[o]) - ref[o]) <= tol) && ++bad <= 5) {
        ADD_FAILURE() << "y[t=" << t << ", r=" << r << "] = " << y[o] << ", reference " << ref[o]
                      << ", tolerance " << tol;
      }
    }
  }
  EXPECT_EQ(bad, 0) << "of " << T * rows << " outputs";
}

// act = gelu(g) · u, g and u as above: act moves by |gelu'(g)| · |u| · δg + |gelu(g)| · δu,
// with |gelu'| <= 1.13 and |gelu(g)| <= |g|; the two gelu forms (tanh on the CPU, exp on the
// GPU) and the products add a few ulps of |g · u| (test/gpu/mlp_test.cpp).
void check_gate_up(const VulkanContext& ctx, const MatvecKernels& k, int64_t I, int64_t H,
                   int64_t T) {
  SCOPED_TRACE("I " + std::to_string(I) + " H " + std::to_string(H) + " T " + std::to_string(T));
  ASSERT_FALSE(runs_matvec_shader(k, I, H, uint32_t(T)));
  const HostMatrix gate = random_matrix(k.format, I, H, uint32_t(I * 131 + H));
  const HostMatrix up = random_matrix(k.format, I, H, uint32_t(I * 137 + H + 1));
  // Activations in [-2, 2): gate sums reach the curved part of gelu and its negative tail.
  const std::vector<float> x = random_vector(size_t(T * H), uint32_t(H + T), -2.0f, 2.0f);
  expect_gate_up_matches(gate.m, up.m, x, T, run(ctx, k, gate, &up, x, T));
}

// Rows 1, 7, 65, 130, 200 leave the last row tile partial; T = 1, 2, 5, 33 most of a token tile
// empty, 64 and 256 fill 64-token tiles, 130 ends mid tile; 96 and 160 columns end mid 64 (a
// 32-column step), 544 mid a 256-column quantized group; 1536 steps through six groups.
const Shape kShapes[] = {{1, 32, 1},     {7, 64, 2},    {65, 96, 5},     {130, 160, 64},
                         {64, 256, 256}, {67, 512, 33}, {200, 544, 130}, {33, 1536, 17}};
// f32 and bf16 take any column count: odd ones end mid quad (f32's last vector is padded) and
// mid bf16 word.
const Shape kOddColumnShapes[] = {{5, 1, 2}, {9, 33, 5}, {70, 1023, 64}, {17, 95, 130}};
// Gate-up: I rows of both matrices, H columns.
const Shape kGateUpShapes[] = {{1, 32, 1},    {7, 64, 5},     {130, 256, 64},
                               {65, 96, 130}, {96, 544, 33}, {200, 128, 256}};

std::string format_name(WeightFormat f) {
  std::string n = weight_format_name(f);
  n[0] = char(std::toupper(n[0]));
  n.erase(std::remove(n.begin(), n.end(), '_'), n.end());
  return n;
}

class GpuMatmul : public GpuTest,
                  public ::testing::WithParamInterface<std::tuple<WeightFormat, Tile>> {};

TEST_P(GpuMatmul, TiledMatchesCpuReference) {
  const auto& [format, t] = GetParam();
  const MatvecKernels k = tiled_kernels(*ctx_, format, /*gate_up=*/false, t.tuning);
  ASSERT_NE(k.tiled, nullptr);
  if (t.quarter) {
    ASSERT_NE(k.tiled_small, nullptr);
  }
  for (const Shape& s : kShapes) check_plain(*ctx_, k, s.rows, s.cols, s.T);
  if (format == WeightFormat::kF32 || format == WeightFormat::kBF16) {
    for (const Shape& s : kOddColumnShapes) check_plain(*ctx_, k, s.rows, s.cols, s.T);
  }
}

TEST_P(GpuMatmul, GateUpTiledMatchesCpuReference) {
  const auto& [format, t] = GetParam();
  const MatvecKernels k = tiled_kernels(*ctx_, format, /*gate_up=*/true, t.tuning);
  ASSERT_NE(k.tiled, nullptr);
  if (t.quarter) {
    ASSERT_NE(k.tiled_small, nullptr);
  }
  for (const Shape& s : kGateUpShapes) check_gate_up(*ctx_, k, s.rows, s.cols, s.T);
  if (format == WeightFormat::kF32 || format == WeightFormat::kBF16) {
    check_gate_up(*ctx_, k, 9, 33, 5);
    check_gate_up(*ctx_, k, 70, 1023, 64);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, GpuMatmul,
    ::testing::Combine(::testing::Values(WeightFormat::kF32, WeightFormat::kBF16,
                                         WeightFormat::kQ8_0, WeightFormat::kQ4_0),
                       ::testing::ValuesIn(kTiles)),
    [](const auto& info) {
      return format_name(std::get<0>(info.param)) + std::get<1>(info.param).name;
    });

using GpuMatmulOp = GpuTest;

// Staged uploads and downloads (what a discrete GPU does), forced on this device.
TEST_F(GpuMatmulOp, TiledMatchesCpuReferenceThroughStagedTransfers) {
  for (WeightFormat f :
       {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
    SCOPED_TRACE(weight_format_name(f));
    const MatvecKernels k = tiled_kernels(*staging_ctx_, f, false, tile(0, 0, 0, 0, 0));
    check_plain(*staging_ctx_, k, 65, 256, 70);
  }
}

TEST_F(GpuMatmulOp, TileShapesTheShaderCannotRunAreRejected) {
  const MatvecTuning bad[] = {
      tile(64, 64, 3, 4, 1),     // 64 rows not a multiple of 3, nor 3 of 4
      tile(64, 64, 2, 4, 1),     // thread rows not a multiple of 4 (vec4 reads)
      tile(64, 64, 4, 4, 3),     // 1 or 2 stages
      tile(256, 256, 16, 16, 2),  // 128 KB of shared memory (devices have 32-64)
      tile(128, 256, 4, 4, 1)};  // 2048 invocations
  for (const MatvecTuning& t : bad) {
    auto k = create_matvec_kernels(*ctx_, WeightFormat::kF32, false, t);
    ASSERT_FALSE(k.ok()) << t.tile_rows << "x" << t.tile_tokens;
    EXPECT_EQ(k.error().code, ErrorCode::kUnsupported);
  }
}

// The tuning's mm_tile/mm_thread/mm_stages fill what MatvecTuning leaves 0 (plain products
// only; mm_gu_* for gate-up), and an explicit MatvecTuning wins.
TEST_F(GpuMatmulOp, TileKnobsComeFromTheTuning) {
  auto make = [&](bool gate_up, const MatvecTuning& t) {
    const ScopedTuning knobs(*ctx_, "mm_tile=32x64,mm_thread=4x8,mm_stages=2");
    return create_matvec_kernels(*ctx_, WeightFormat::kQ4_0, gate_up, t);
  };
  auto k = make(false, {});
  auto gu = make(true, {});
  auto given = make(false, tile(16, 16, 4, 4, 1));
  ASSERT_TRUE(k.ok() && gu.ok() && given.ok());
  EXPECT_EQ(k->tuning.tile_rows, 32u);
  EXPECT_EQ(k->tuning.tile_tokens, 64u);
  EXPECT_EQ(k->tuning.thread_rows, 4u);
  EXPECT_EQ(k->tuning.thread_tokens, 8u);
  EXPECT_EQ(k->tuning.tile_stages, 2u);
  EXPECT_NE(gu->tuning.tile_rows, 32u);
  EXPECT_EQ(given->tuning.tile_rows, 16u);
  EXPECT_EQ(given->tuning.tile_stages, 1u);
  k->coop.reset();  // the knobs' f32 tiles, not the cooperative kernel, on every device
  check_plain(*ctx_, *k, 67, 512, 33);
}

}  // namespace
}  // namespace infer::gpu
