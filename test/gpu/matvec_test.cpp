// GPU matvec and tiled matmul vs the CPU reference (model/ops/matmul.h) for every weight format, on
// the same weight bytes: shapes with ragged row groups and tiles, odd columns, T from 1 to 256,
// staged and UMA transfers.
#include "gpu/ops/matvec.h"

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "model/matrix.h"
#include "model/ops/matmul.h"
#include "test/gpu/gpu_test_env.h"
#include "test/gpu/host_matrix.h"

namespace infer {
// Test output names the format ("q4_0") rather than its bytes.
inline void PrintTo(WeightFormat f, std::ostream* os) { *os << weight_format_name(f); }
}  // namespace infer

namespace infer::gpu {
namespace {

// The reference sums in double, the GPU in f32 in its own order (per-invocation partial sums, then
// subgroupAdd, then subgroup partials). Each f32 addition errs by at most eps/2 of the running
// magnitude, bounded by S = sum_c |w_rc * x_tc|; rounding errors of n terms add up like a random
// walk, ~sqrt(n) * eps/2
// * S. Weights decode exactly (bf16 shifts, d * q in f32 on both sides), so this is the whole
// error; 8x margin.
// On the cooperative-matrix kernel (products_in_f16) weights and activations are rounded to f16
// first: each product is off by at most 2^-10 of itself, so 2^-10 · S more.
void expect_matches_reference(const Matrix& w, const std::vector<float>& x, int64_t T,
                              const std::vector<float>& y_gpu, bool f16 = false) {
  std::vector<float> y_ref(size_t(T * w.rows));
  matmul_reference(w, x.data(), T, y_ref.data());
  std::vector<float> row(size_t(w.cols));
  int bad = 0;
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w, r, row.data());
    for (int64_t t = 0; t < T; ++t) {
      double abs_sum = 0;
      for (int64_t c = 0; c < w.cols; ++c) abs_sum += std::fabs(double(row[c]) * x[t * w.cols + c]);
      const double tol =
          (8.0 * FLT_EPSILON * std::sqrt(double(w.cols)) + (f16 ? std::ldexp(1.0, -10) : 0.0)) *
              abs_sum +
          1e-30;
      const float got = y_gpu[size_t(t * w.rows + r)], want = y_ref[size_t(t * w.rows + r)];
      if (!(std::fabs(double(got) - want) <= tol) && ++bad <= 5) {
        ADD_FAILURE() << weight_format_name(w.format) << " y[t=" << t << ", r=" << r
                      << "] = " << got << ", reference " << want << ", tolerance " << tol;
      }
    }
  }
  EXPECT_EQ(bad, 0) << "of " << T * w.rows << " outputs";
}

void check_matvec(const VulkanContext& ctx, WeightFormat format, int64_t rows, int64_t cols,
                  int64_t T, MatvecTuning tuning = {}) {
  SCOPED_TRACE(std::string(weight_format_name(format)) + " rows " + std::to_string(rows) +
               " cols " + std::to_string(cols) + " T " + std::to_string(T));
  const HostMatrix h = random_matrix(format, rows, cols, uint32_t(rows * 7919 + cols));
  const std::vector<float> x = random_vector(size_t(T * cols), uint32_t(cols + T));
  auto w = upload_matrix(ctx, h.m, "w");
  ASSERT_TRUE(w.ok()) << w.error().message;
  auto op = MatvecOp::create(ctx, format, tuning);
  ASSERT_TRUE(op.ok()) << op.error().message;
  std::vector<float> y(size_t(T * rows), NAN);
  auto r = run_matvec(ctx, **op, *w, x.data(), T, y.data());
  ASSERT_TRUE(r.ok()) << r.error().message;
  expect_matches_reference(h.m, x, T, y, (*op)->products_in_f16(rows, cols, uint32_t(T)));
}

struct Shape {
  int64_t rows, cols, T;
};

void PrintTo(const Shape& s, std::ostream* os) {
  *os << "rows " << s.rows << " cols " << s.cols << " T " << s.T;
}

std::string shape_name(WeightFormat f, const Shape& s) {
  std::string n = weight_format_name(f);
  n[0] = char(std::toupper(n[0]));
  n.erase(std::remove(n.begin(), n.end(), '_'), n.end());
  return n + "Rows" + std::to_string(s.rows) + "Cols" + std::to_string(s.cols) + "T" +
         std::to_string(s.T);
}

using GpuMatvecOp = GpuTest;

class GpuMatvec : public GpuTest,
                  public ::testing::WithParamInterface<std::tuple<WeightFormat, Shape>> {};

TEST_P(GpuMatvec, MatchesCpuReference) {
  const auto [format, s] = GetParam();
  check_matvec(*ctx_, format, s.rows, s.cols, s.T);
}

// Rows 1, 7, 33, 257 leave the last row group partial (2 rows a group by default); T = 3 and 5
// leave the last token group partial (4 a group); 4096 x 1536 and 1536 x 4096 are model-sized.
// T = 200: the tiled kernels (cooperative matrices where the device has them) on the e2b-long
// fixture's shapes: 32 and 64 columns, 16 to 512 rows, a partial last token tile.
const Shape kShapes[] = {{1, 32, 1},    {7, 64, 1},      {33, 96, 1},     {257, 1024, 1},
                         {64, 4096, 1}, {4096, 1536, 1}, {1536, 4096, 1}, {33, 128, 3},
                         {20, 256, 5},  {130, 512, 8},   {16, 64, 200},
                         {512, 64, 200}, {192, 64, 200}, {64, 32, 200}};

INSTANTIATE_TEST_SUITE_P(
    Formats, GpuMatvec,
    ::testing::Combine(::testing::Values(WeightFormat::kF32, WeightFormat::kBF16,
                                         WeightFormat::kQ8_0, WeightFormat::kQ4_0),
                       ::testing::ValuesIn(kShapes)),
    [](const auto& info) { return shape_name(std::get<0>(info.param), std::get<1>(info.param)); });

// f32 and bf16 take any column count: odd ones exercise bf16's 16-bit path and partial units.
TEST_F(GpuMatvecOp, MatvecTakesOddColumnsForF32AndBf16) {
  for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kBF16}) {
    check_matvec(*ctx_, f, 5, 1, 1);
    check_matvec(*ctx_, f, 9, 33, 1);
    check_matvec(*ctx_, f, 17, 1023, 3);
  }
}

// Staged uploads and downloads (what a discrete GPU does), forced on this device.
TEST_F(GpuMatvecOp, MatvecMatchesCpuReferenceThroughStagedTransfers) {
  for (WeightFormat f :
       {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
    check_matvec(*staging_ctx_, f, 65, 512, 1);
    check_matvec(*staging_ctx_, f, 31, 256, 6);
  }
}

// Other workgroup shapes than the device default: one subgroup, 3 rows and 3 tokens a group.
TEST_F(GpuMatvecOp, MatvecMatchesCpuReferenceForOtherWorkgroupShapes) {
  for (WeightFormat f :
       {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
    check_matvec(*ctx_, f, 100, 640, 1, MatvecTuning{1, 3, 3});
    check_matvec(*ctx_, f, 100, 640, 7, MatvecTuning{1, 3, 3});
    check_matvec(*ctx_, f, 50, 320, 2, MatvecTuning{4, 1, 2});
  }
}

// The tiled kernel, forced for every T (matmul_min_tokens = 1): T = 1, 2, 5 leave most of a
// 64-token tile empty, 64 fills one, 256 four; rows 1, 7, 65, 130 leave the last 64-row tile
// partial; 96 and 160 columns end mid 64 but on a 32-column step (quantized blocks).
class GpuMatmul : public GpuTest,
                  public ::testing::WithParamInterface<std::tuple<WeightFormat, Shape>> {};

MatvecTuning forced_tiled(MatvecTuning t = {}) {
  t.matmul_min_tokens = 1;
  t.matmul_min_groups = 1;
  return t;
}

TEST_P(GpuMatmul, TiledMatchesCpuReference) {
  const auto [format, s] = GetParam();
  check_matvec(*ctx_, format, s.rows, s.cols, s.T, forced_tiled());
}

const Shape kTiledShapes[] = {{1, 32, 1},     {7, 64, 2},    {65, 96, 5},    {130, 160, 64},
                              {64, 256, 256}, {67, 512, 33}, {200, 128, 256}};

INSTANTIATE_TEST_SUITE_P(
    Formats, GpuMatmul,
    ::testing::Combine(::testing::Values(WeightFormat::kF32, WeightFormat::kBF16,
                                         WeightFormat::kQ8_0, WeightFormat::kQ4_0),
                       ::testing::ValuesIn(kTiledShapes)),
    [](const auto& info) { return shape_name(std::get<0>(info.param), std::get<1>(info.param)); });

// Default tuning: the tiled kernel's threshold sits between decode-sized and prompt-sized T, and
// prompts that fill whole token tiles (T = 64, 256: the tiled kernel) match the reference.
TEST_F(GpuMatvecOp, DefaultTuningSwitchesToTiledForLongPrompts) {
  auto op = MatvecOp::create(*ctx_, WeightFormat::kQ4_0);
  ASSERT_TRUE(op.ok()) << op.error().message;
  EXPECT_LE((*op)->tuning().matmul_min_tokens, 64u);
  EXPECT_GT((*op)->tuning().matmul_min_tokens, 5u);
  for (WeightFormat f :
       {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
    check_matvec(*ctx_, f, 96, 256, 64);
    check_matvec(*ctx_, f, 33, 128, 256);
  }
}

// Odd column counts in the tiled kernel: bf16's last unit reaches past the row, and the last
// 32-column step is partial for both.
TEST_F(GpuMatvecOp, TiledTakesOddColumnsForF32AndBf16) {
  for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kBF16}) {
    check_matvec(*ctx_, f, 5, 1, 2, forced_tiled());
    check_matvec(*ctx_, f, 9, 33, 5, forced_tiled());
    check_matvec(*ctx_, f, 70, 1023, 64, forced_tiled());
    check_matvec(*ctx_, f, 17, 95, 256, forced_tiled());
  }
}

// Other tile shapes than the default: narrow token tiles, one output per invocation, tall register
// blocks.
TEST_F(GpuMatvecOp, TiledMatchesCpuReferenceForOtherTileShapes) {
  const MatvecTuning shapes[] = {forced_tiled({0, 0, 0, 0, 0, 32, 16, 2, 4}),
                                 forced_tiled({0, 0, 0, 0, 0, 16, 16, 1, 1}),
                                 forced_tiled({0, 0, 0, 0, 0, 128, 32, 8, 2})};
  for (const MatvecTuning& t : shapes) {
    for (WeightFormat f :
         {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
      check_matvec(*ctx_, f, 100, 320, 37, t);
    }
  }
}

TEST_F(GpuMatvecOp, TiledMatchesCpuReferenceThroughStagedTransfers) {
  for (WeightFormat f :
       {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
    check_matvec(*staging_ctx_, f, 65, 256, 70);
  }
}

TEST_F(GpuMatvecOp, TileShapesTheShaderCannotRunAreRejected) {
  MatvecTuning t = forced_tiled({0, 0, 0, 0, 0, 64, 64, 3, 4});  // 64 rows not a multiple of 3
  auto op = MatvecOp::create(*ctx_, WeightFormat::kF32, t);
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error().code, ErrorCode::kUnsupported);
}

// The device copy is repacked (gpu/ops/matvec.h): every row read back and decoded from the device
// layout equals the CPU's dequantize_row bit for bit, and the padding up to the layout's group
// decodes as zero weights (what lets the shaders multiply it with any finite activation).
TEST_F(GpuMatvecOp, UploadedRowsRoundTripThroughTheDeviceLayout) {
  struct Case {
    WeightFormat format;
    int64_t rows, cols;
  };
  const Case cases[] = {{WeightFormat::kF32, 3, 1},     {WeightFormat::kF32, 5, 33},
                        {WeightFormat::kBF16, 3, 1},    {WeightFormat::kBF16, 4, 63},
                        {WeightFormat::kBF16, 5, 130},  {WeightFormat::kQ8_0, 3, 32},
                        {WeightFormat::kQ8_0, 4, 288},  {WeightFormat::kQ8_0, 2, 512},
                        {WeightFormat::kQ4_0, 3, 96},   {WeightFormat::kQ4_0, 4, 544},
                        {WeightFormat::kQ4_0, 2, 1536}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(weight_format_name(c.format)) + " cols " + std::to_string(c.cols));
    const HostMatrix h = random_matrix(c.format, c.rows, c.cols, uint32_t(c.cols));
    auto w = upload_matrix(*ctx_, h.m, "w");
    ASSERT_TRUE(w.ok()) << w.error().message;
    const size_t row_size = device_row_bytes(c.format, c.cols);
    ASSERT_EQ(row_size % 16, 0u);
    ASSERT_GE(row_size, row_bytes(c.format, c.cols));
    ASSERT_EQ(w->buffer.size(), row_size * size_t(c.rows));
    std::vector<uint8_t> device(w->buffer.size());
    ASSERT_TRUE(download(*ctx_, w->buffer, 0, device.data(), device.size()).ok());
    // Columns the row's vectors hold: 4 (f32), 64 (bf16) or 256 (Q8_0/Q4_0) a group.
    const int64_t group = c.format == WeightFormat::kF32    ? 4
                          : c.format == WeightFormat::kBF16 ? 64
                                                            : 256;
    const int64_t padded = (c.cols + group - 1) / group * group;
    std::vector<float> want(size_t(c.cols)), got(size_t(padded), NAN);
    for (int64_t r = 0; r < c.rows; ++r) {
      dequantize_row(h.m, r, want.data());
      dequantize_device_row(c.format, padded, device.data() + size_t(r) * row_size, got.data());
      for (int64_t k = 0; k < c.cols; ++k) {
        ASSERT_EQ(std::memcmp(&got[size_t(k)], &want[size_t(k)], 4), 0)
            << "row " << r << " col " << k << ": " << got[size_t(k)] << " vs " << want[size_t(k)];
      }
      for (int64_t k = c.cols; k < padded; ++k) {
        ASSERT_EQ(got[size_t(k)], 0.0f) << "row " << r << " padding col " << k;
      }
    }
  }
}

TEST_F(GpuMatvecOp, UploadMatrixRejectsQuantizedColumnsNotAMultipleOf32) {
  std::vector<uint8_t> bytes(1024);
  const Matrix m{WeightFormat::kQ8_0, 2, 48, bytes.data()};
  auto w = upload_matrix(*ctx_, m, "bad");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code, ErrorCode::kShape);
}

}  // namespace
}  // namespace infer::gpu
