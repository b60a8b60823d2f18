// GPU matvec and tiled matmul vs the CPU reference (model/ops/matmul.h) for every weight format, on
// the same weight bytes: shapes with ragged row groups and tiles, odd columns, T from 1 to 256,
// staged and UMA transfers.
#include "gpu/ops/matvec.h"

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "model/matrix.h"
#include "gpu/recorder.h"
#include "model/ops/gelu.h"
#include "model/ops/matmul.h"
#include "model/quant.h"
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
// On the cooperative-matrix kernel (products_in_f16) activations (and quantized weights) go in
// as f16 pairs hi + lo: each factor keeps ~22 bits, or 2^-25 absolute where lo is subnormal, so
// 2^-20 · S + 2^-23 · sum_c (|w_c| + |x_c|) more (with the lo parts dropped, a product errs by
// up to 2^-11 of itself: far above this). INFER_COOP_SPLIT=0 (plain f16): 2^-10 · S more.
bool coop_plain_f16() {
  const char* v = std::getenv("INFER_COOP_SPLIT");
  return v != nullptr && v[0] == '0';
}

void expect_matches_reference(const Matrix& w, const std::vector<float>& x, int64_t T,
                              const std::vector<float>& y_gpu, bool f16 = false) {
  std::vector<float> y_ref(size_t(T * w.rows));
  matmul_reference(w, x.data(), T, y_ref.data());
  std::vector<float> row(size_t(w.cols));
  int bad = 0;
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w, r, row.data());
    for (int64_t t = 0; t < T; ++t) {
      double abs_sum = 0, factors = 0;
      for (int64_t c = 0; c < w.cols; ++c) {
        abs_sum += std::fabs(double(row[c]) * x[t * w.cols + c]);
        factors += std::fabs(double(row[c])) + std::fabs(double(x[t * w.cols + c]));
      }
      double f16_tol = 0.0;
      if (f16) {
        f16_tol = coop_plain_f16() ? std::ldexp(abs_sum, -10)
                                   : std::ldexp(abs_sum, -20) + std::ldexp(factors, -23);
      }
      const double tol = 8.0 * FLT_EPSILON * std::sqrt(double(w.cols)) * abs_sum + f16_tol + 1e-30;
      const float got = y_gpu[size_t(t * w.rows + r)], want = y_ref[size_t(t * w.rows + r)];
      if (!(std::fabs(double(got) - want) <= tol) && ++bad <= 5) {
        ADD_FAILURE() << weight_format_name(w.format) << " y[t=" << t << ", r=" << r
                      << "] = " << got << ", reference " << want << ", tolerance " << tol;
      }
    }
  }
  EXPECT_EQ(bad, 0) << "of " << T * w.rows << " outputs";
}

// The integer-dot kernel (activations_in_int8) against matmul_reference_q8_x, the CPU's int8
// contract: x quantized per block of 32 the CPU's way, so each block dot is an exact integer on
// both sides (the GPU quantizes bit for bit like the CPU, common/quant_x.glsl) and only the f32
// sum of dot · d_w · d_x differs: per-term roundings (the scale product, the product) and the
// running sum, bounded as above with S = sum_c |q_w · q_x| · d_w · d_x. One quantized activation
// off by one moves y by d_w · d_x · |q_w|, above this bound on the short rows of these shapes.
void expect_matches_int8_reference(const Matrix& w, const std::vector<float>& x, int64_t T,
                                   const std::vector<float>& y_gpu) {
  std::vector<float> y_ref(size_t(T * w.rows));
  matmul_reference_q8_x(w, x.data(), T, y_ref.data());
  const int64_t nb = w.cols / kQK;
  std::vector<BlockQ8_0> xq(size_t(T * nb));
  for (int64_t t = 0; t < T; ++t) quantize_row_q8_0(&x[size_t(t * w.cols)], &xq[size_t(t * nb)], w.cols);
  std::vector<float> row(size_t(w.cols));
  int bad = 0;
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w, r, row.data());  // d_w · q_w
    for (int64_t t = 0; t < T; ++t) {
      double abs_sum = 0;
      for (int64_t c = 0; c < w.cols; ++c) {
        const BlockQ8_0& b = xq[size_t(t * nb + c / kQK)];
        abs_sum += std::fabs(double(row[c]) * fp16_to_f32(b.d) * b.qs[c % kQK]);
      }
      const double tol = 8.0 * FLT_EPSILON * std::sqrt(double(w.cols)) * abs_sum + 1e-30;
      const float got = y_gpu[size_t(t * w.rows + r)], want = y_ref[size_t(t * w.rows + r)];
      if (!(std::fabs(double(got) - want) <= tol) && ++bad <= 5) {
        ADD_FAILURE() << weight_format_name(w.format) << " (int8 x) y[t=" << t << ", r=" << r
                      << "] = " << got << ", reference " << want << ", tolerance " << tol;
      }
    }
  }
  EXPECT_EQ(bad, 0) << "of " << T * w.rows << " outputs";
}

// Runs one product on the GPU and checks it against the reference of the path it took; returns
// whether that was the integer-dot kernel.
bool check_matvec_x(const VulkanContext& ctx, WeightFormat format, int64_t rows, int64_t cols,
                    int64_t T, const std::vector<float>& x, MatvecTuning tuning) {
  const HostMatrix h = random_matrix(format, rows, cols, uint32_t(rows * 7919 + cols));
  auto w = upload_matrix(ctx, h.m, "w");
  EXPECT_TRUE(w.ok()) << w.error().message;
  if (!w.ok()) return false;
  auto op = MatvecOp::create(ctx, format, tuning);
  EXPECT_TRUE(op.ok()) << op.error().message;
  if (!op.ok()) return false;
  std::vector<float> y(size_t(T * rows), NAN);
  auto r = run_matvec(ctx, **op, *w, x.data(), T, y.data());
  EXPECT_TRUE(r.ok()) << r.error().message;
  const bool int8 = (*op)->activations_in_int8(rows, cols, uint32_t(T));
  if (int8) {
    expect_matches_int8_reference(h.m, x, T, y);
  } else {
    expect_matches_reference(h.m, x, T, y, (*op)->products_in_f16(rows, cols, uint32_t(T)));
  }
  return int8;
}

void check_matvec(const VulkanContext& ctx, WeightFormat format, int64_t rows, int64_t cols,
                  int64_t T, MatvecTuning tuning = {}) {
  SCOPED_TRACE(std::string(weight_format_name(format)) + " rows " + std::to_string(rows) +
               " cols " + std::to_string(cols) + " T " + std::to_string(T));
  const std::vector<float> x = random_vector(size_t(T * cols), uint32_t(cols + T));
  check_matvec_x(ctx, format, rows, cols, T, x, tuning);
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

// Quantized formats also on the integer-dot kernel where the device has it (the GPU tests turn
// it off by default: test/gpu/gpu_test_env.cpp); T = 200 takes the tiled kernel either way.
TEST_P(GpuMatvec, MatchesCpuReference) {
  const auto [format, s] = GetParam();
  check_matvec(*ctx_, format, s.rows, s.cols, s.T);
  const bool quantized = format == WeightFormat::kQ8_0 || format == WeightFormat::kQ4_0;
  if (quantized && ctx_->info().integer_dot_product) {
    MatvecTuning on;
    on.int_dot = IntDot::kOn;
    check_matvec(*ctx_, format, s.rows, s.cols, s.T, on);
  }
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

// The integer-dot kernel (shaders/matvec_dot.comp) on ragged shapes: columns ending mid
// 256-column group (288, 544, 800, 1056, 2080), rows ending mid workgroup, T = 2, 3, 5 ending mid
// token group, and the widest rows its shared memory takes (16384 at T = 1, 6144 for T > 1).
TEST_F(GpuMatvecOp, IntDotMatchesInt8ReferenceOnRaggedShapes) {
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

// Rows wider than the kernel's shared memory, and IntDot::kOff, take matvec.comp
// with f32 activations (checked against matmul_reference's tighter bound).
TEST_F(GpuMatvecOp, IntDotFallsBackToF32Activations) {
  MatvecTuning off;
  off.int_dot = IntDot::kOff;
  for (WeightFormat f : {WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
    const std::vector<float> x = random_vector(size_t(2 * 6400), 11);
    EXPECT_FALSE(check_matvec_x(*ctx_, f, 5, 544, 1, x, off));
    EXPECT_FALSE(check_matvec_x(*ctx_, f, 5, 6400, 2, x, {}));  // 25 groups a token
    const std::vector<float> wide = random_vector(16640, 12);
    EXPECT_FALSE(check_matvec_x(*ctx_, f, 3, 16640, 1, wide, {}));  // 65 groups
  }
}

// Activations whose scaled values are exact halves (amax 127 -> d = 1; amax 127 · 2^-20 -> d =
// 2^-20, a subnormal f16 scale): the GPU must round them away from zero like roundf, not to even,
// and keep d exact; a quant off by one breaks the tolerance at 96 columns. Plus blocks of zeros.
TEST_F(GpuMatvecOp, IntDotQuantizesActivationsLikeTheCpu) {
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
TEST_F(GpuMatvecOp, IntDotMatchesInt8ReferenceForOtherWorkgroupShapes) {
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

// The gate-up variant of the integer-dot kernel (gelu(G·x) ⊙ (U·x), gpu/ops/mlp.h's decode path)
// against the CPU on x as the kernel quantizes it (q · d per block, exact in f32), with
// test/gpu/mlp_test.cpp's bound: c·S per sum carried through gelu' <= 1.13 and the product.
TEST_F(GpuMatvecOp, GateUpIntDotMatchesInt8Reference) {
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
      const std::vector<float> x = random_vector(size_t(s.T * s.H), uint32_t(s.H + s.T), -2.0f, 2.0f);
      auto k = create_matvec_kernels(*ctx_, f, /*gate_up=*/true, on);
      ASSERT_TRUE(k.ok()) << k.error().message;
      ASSERT_TRUE(activations_in_int8(*k, s.I, s.H, uint32_t(s.T)));
      auto g = upload_matrix(*ctx_, gate.m, "gate");
      auto u = upload_matrix(*ctx_, up.m, "up");
      ASSERT_TRUE(g.ok() && u.ok());
      const size_t x_bytes = x.size() * 4, y_bytes = size_t(s.T * s.I) * 4;
      auto xb = Buffer::create(*ctx_, x_bytes, BufferKind::kDevice, "x");
      auto yb = Buffer::create(*ctx_, y_bytes, BufferKind::kDevice, "act");
      ASSERT_TRUE(xb.ok() && yb.ok());
      ASSERT_TRUE(upload(*ctx_, *xb, 0, x.data(), x_bytes).ok());
      auto rec = Recorder::create(*ctx_);
      ASSERT_TRUE(rec.ok());
      ASSERT_TRUE((*rec)->begin().ok());
      ASSERT_TRUE(record_matvec_kernels(**rec, *k, *g, &*u, Binding{&*xb}, Binding{&*yb},
                                        uint32_t(s.T)).ok());
      ASSERT_TRUE((*rec)->submit_and_wait().ok());
      std::vector<float> act(size_t(s.T * s.I));
      ASSERT_TRUE(download(*ctx_, *yb, 0, act.data(), y_bytes).ok());

      std::vector<float> x_ref(x.size());
      std::vector<BlockQ8_0> xq(size_t(s.H / kQK));
      for (int64_t t = 0; t < s.T; ++t) {
        quantize_row_q8_0(&x[size_t(t * s.H)], xq.data(), s.H);
        dequantize_row_q8_0(xq.data(), &x_ref[size_t(t * s.H)], s.H);
      }
      std::vector<float> g_ref(act.size()), u_ref(act.size()), act_ref(act.size());
      matmul_reference(gate.m, x_ref.data(), s.T, g_ref.data());
      matmul_reference(up.m, x_ref.data(), s.T, u_ref.data());
      gelu_mul(g_ref.data(), u_ref.data(), s.T * s.I, act_ref.data());
      const double c = 8.0 * FLT_EPSILON * std::sqrt(double(s.H));
      std::vector<float> grow(size_t(s.H)), urow(size_t(s.H));
      int bad = 0;
      for (int64_t i = 0; i < s.I; ++i) {
        dequantize_row(gate.m, i, grow.data());
        dequantize_row(up.m, i, urow.data());
        for (int64_t t = 0; t < s.T; ++t) {
          double sg = 0, su = 0;
          for (int64_t h = 0; h < s.H; ++h) {
            sg += std::fabs(double(grow[h]) * x_ref[size_t(t * s.H + h)]);
            su += std::fabs(double(urow[h]) * x_ref[size_t(t * s.H + h)]);
          }
          const size_t o = size_t(t * s.I + i);
          const double gv = std::fabs(g_ref[o]), uv = std::fabs(u_ref[o]);
          const double tol = 1.13 * uv * c * sg + gv * c * su + 32.0 * FLT_EPSILON * gv * uv + 1e-30;
          if (!(std::fabs(double(act[o]) - act_ref[o]) <= tol) && ++bad <= 5) {
            ADD_FAILURE() << "act[t=" << t << ", i=" << i << "] = " << act[o] << ", reference "
                          << act_ref[o] << ", tolerance " << tol;
          }
        }
      }
      EXPECT_EQ(bad, 0);
    }
  }
}

}  // namespace
}  // namespace infer::gpu
