// GPU matvec (shaders/matvec.comp) vs the CPU reference (model/ops/matmul.h) for every weight
// format, on the same weight bytes: shapes with ragged row groups, odd columns, T from 1 to 200,
// every workgroup shape the knobs give (split rows among them), plain and gate-up, staged and UMA
// transfers; and the device layout. The integer-dot kernel: matvec_dot_test.cpp; the tiled
// kernel: matmul_test.cpp.
#include "gpu/ops/matvec.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/check.h"
#include "gpu/recorder.h"
#include "model/matrix.h"
#include "model/ops/gelu.h"
#include "model/ops/matmul.h"
#include "test/gpu/gpu_test_env.h"
#include "test/gpu/host_matrix.h"
#include "test/gpu/matvec_check.h"

namespace infer::gpu {
namespace {

using GpuMatvecOp = GpuTest;

// A workgroup shape of matvec.comp (MatvecTuning's fields; zeros: the environment's knobs, then
// the defaults), named for the test output.
struct Setting {
  const char* name;
  MatvecTuning tuning;
};

void PrintTo(const Setting& s, std::ostream* os) { *os << s.name; }

MatvecTuning shape(uint32_t subgroups, uint32_t rows, uint32_t tokens, uint32_t unroll,
                   uint32_t max_split, uint32_t rounds) {
  MatvecTuning t;
  t.subgroups_per_group = subgroups;
  t.rows_per_subgroup = rows;
  t.tokens_per_group = tokens;
  t.vec_unroll = unroll;
  t.max_split = max_split;
  t.split_rounds = rounds;
  return t;
}

// 4 rows a subgroup, 2 vectors a round, unsplit, rows halved below 100 subgroups a grid (one-token
// products of 1536 and 4096 rows keep 4 rows, 257 take 2, 64 and fewer 1:
// MatvecTuning::min_grid_subgroups), one vector a round where 2 does not divide a row's chunks.
MatvecTuning halved_on_small_grids() {
  MatvecTuning t = shape(2, 4, 0, 2, 1, 0);
  t.min_grid_subgroups = 100;
  return t;
}

// Default; the previous kernel's shape (2 subgroups, no split); 6 subgroups of 3 rows, 3 tokens,
// one vector a round (splits of 1, 2, 3 or 6 subgroups, the odd ones ragged against every row);
// 8 subgroups of 1 row, 2 tokens, 3 vectors a round, split while a part takes over 2 rounds;
// rows halved per product on small grids.
const Setting kSettings[] = {{"Default", {}},
                             {"Unsplit", shape(2, 0, 0, 0, 1, 0)},
                             {"Split3Rows3", shape(6, 3, 3, 1, 6, 1)},
                             {"Split8Unroll3", shape(8, 1, 2, 3, 8, 2)},
                             {"HalvedOnSmallGrids", halved_on_small_grids()}};

class GpuMatvec
    : public GpuTest,
      public ::testing::WithParamInterface<std::tuple<Setting, WeightFormat, Shape>> {};

// The kernels of a setting and format, created once for all shapes: building their pipelines
// takes most of a case's time on lavapipe. The GPU tests share one context (gpu_test_env.cpp);
// the cache is emptied before it goes.
template <typename Kernels>
const Kernels& cached(const VulkanContext& ctx, const Setting& setting, WeightFormat f,
                      Result<Kernels> (*create)(const VulkanContext&, WeightFormat,
                                                const MatvecTuning&)) {
  static std::map<std::tuple<const VulkanContext*, std::string, WeightFormat>, Kernels> made;
  if (made.empty()) before_contexts_release([] { made.clear(); });
  const auto key = std::make_tuple(&ctx, std::string(setting.name), f);
  auto it = made.find(key);
  if (it == made.end()) {
    Result<Kernels> k = create(ctx, f, setting.tuning);
    INFER_CHECK(k.ok(), "%s", k.error().message.c_str());
    it = made.emplace(key, std::move(*k)).first;
  }
  return it->second;
}

Result<std::unique_ptr<MatvecOp>> create_op(const VulkanContext& ctx, WeightFormat f,
                                            const MatvecTuning& t) {
  return MatvecOp::create(ctx, f, t);
}
Result<MatvecKernels> create_gate_up(const VulkanContext& ctx, WeightFormat f,
                                     const MatvecTuning& t) {
  return create_matvec_kernels(ctx, f, /*gate_up=*/true, t);
}

TEST_P(GpuMatvec, MatchesCpuReference) {
  const auto [setting, format, s] = GetParam();
  SCOPED_TRACE(shape_name(format, s));
  const std::vector<float> x = random_vector(size_t(s.T * s.cols), uint32_t(s.cols + s.T));
  check_matvec_op(*ctx_, *cached(*ctx_, setting, format, &create_op), s.rows, s.cols, s.T, x);
}

std::string setting_shape_name(const Setting& setting, WeightFormat f, const Shape& s) {
  return std::string(setting.name) + shape_name(f, s);
}

INSTANTIATE_TEST_SUITE_P(
    Formats, GpuMatvec,
    ::testing::Combine(::testing::ValuesIn(kSettings),
                       ::testing::Values(WeightFormat::kF32, WeightFormat::kBF16,
                                         WeightFormat::kQ8_0, WeightFormat::kQ4_0),
                       ::testing::ValuesIn(kMatvecShapes)),
    [](const auto& info) {
      return setting_shape_name(std::get<0>(info.param), std::get<1>(info.param),
                                std::get<2>(info.param));
    });

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

// The tiled kernel's own cases (every format and tile shape): test/gpu/matmul_test.cpp.

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

// Prompt-sized T on the default tuning: the tiled kernels (cooperative matrices where the device
// has them) on the e2b-long fixture's shapes; on cooperative matrices both the full tile and the
// half tile (coopmat_small_below: these grids are short of any device's default, so 0 forces
// the full tile).
TEST_F(GpuMatvecOp, PromptShapesMatchCpuReference) {
  for (const char* tune : {"coopmat_small_below=0", "coopmat_small_below=1000000"}) {
    SCOPED_TRACE(tune);
    const ScopedTuning knobs(*ctx_, tune);
    for (WeightFormat f :
         {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
      for (const Shape& s : kTiledShapes) check_matvec(*ctx_, f, s.rows, s.cols, s.T);
    }
  }
}

// The gate-up variant (gelu(G·x) ⊙ (U·x), two matrices a lane) on every setting: I rows of H
// columns, ragged against each workgroup's rows, the split parts and the token groups.
class GpuMatvecGateUp
    : public GpuTest,
      public ::testing::WithParamInterface<std::tuple<Setting, WeightFormat, Shape>> {};

TEST_P(GpuMatvecGateUp, MatchesCpuReference) {
  const auto [setting, f, s] = GetParam();
  const HostMatrix gate = random_matrix(f, s.rows, s.cols, uint32_t(s.rows * 131 + s.cols));
  const HostMatrix up = random_matrix(f, s.rows, s.cols, uint32_t(s.rows * 137 + s.cols + 1));
  const std::vector<float> x =
      random_vector(size_t(s.T * s.cols), uint32_t(s.cols + s.T), -2.0f, 2.0f);
  const MatvecKernels& k = cached(*ctx_, setting, f, &create_gate_up);
  ASSERT_TRUE(runs_matvec_shader(k, s.rows, s.cols, uint32_t(s.T)));
  expect_gate_up_matches(gate.m, up.m, x, s.T, run_gate_up(*ctx_, k, gate.m, up.m, x, s.T));
}

const Shape kGateUpShapes[] = {{7, 288, 1}, {33, 2080, 3}, {130, 1056, 1}, {64, 4096, 5}};

INSTANTIATE_TEST_SUITE_P(
    Formats, GpuMatvecGateUp,
    ::testing::Combine(::testing::ValuesIn(kSettings),
                       ::testing::Values(WeightFormat::kF32, WeightFormat::kBF16,
                                         WeightFormat::kQ8_0, WeightFormat::kQ4_0),
                       ::testing::ValuesIn(kGateUpShapes)),
    [](const auto& info) {
      return setting_shape_name(std::get<0>(info.param), std::get<1>(info.param),
                                std::get<2>(info.param));
    });

// The split follows the row length: rows of one round stay whole; longer ones split until each
// part takes at most split_rounds rounds, over a divisor of the workgroup's subgroups. Few rows
// split further, while each part gets a chunk, until the grid has split_min_groups workgroups.
TEST_F(GpuMatvecOp, RowsSplitByLengthAndCount) {
  MatvecTuning four = shape(4, 4, 4, 2, 4, 1);  // Q4_0: 16 rows a workgroup unsplit
  four.split_min_groups = 256;
  auto k = create_matvec_kernels(*ctx_, WeightFormat::kQ4_0, false, four);
  ASSERT_TRUE(k.ok()) << k.error().message;
  // A chunk: a vector a lane, so group_cols columns (8 vectors of 256 a group) make one.
  const int64_t lanes = k->subgroup_size, group_cols = 256 * lanes / 8, many = 1 << 20;
  ASSERT_EQ(lanes % 8, 0) << "the cases below count whole 256-column groups a chunk";
  EXPECT_EQ(matvec_split(*k, many, 2 * group_cols), 1u);   // 2 chunks: one round
  EXPECT_EQ(matvec_split(*k, many, 4 * group_cols), 2u);   // 4 chunks: 2 rounds
  EXPECT_EQ(matvec_split(*k, many, 5 * group_cols), 4u);   // 5 chunks: 3 rounds
  EXPECT_EQ(matvec_split(*k, many, 64 * group_cols), 4u);  // as far as 4 subgroups go
  EXPECT_EQ(matvec_split(*k, 256 * 16, 2 * group_cols), 1u);  // 256 workgroups whole
  EXPECT_EQ(matvec_split(*k, 1536, 2 * group_cols), 2u);  // 96 -> 192 workgroups, 2 chunks
  EXPECT_EQ(matvec_split(*k, 1536, 8 * group_cols), 4u);
  EXPECT_EQ(matvec_split(*k, 1536, 32), 1u);  // 8 vectors, one chunk: nothing to split
  MatvecTuning six_t = shape(6, 1, 1, 1, 6, 2);
  six_t.split_min_groups = 1;
  auto six = create_matvec_kernels(*ctx_, WeightFormat::kQ4_0, false, six_t);
  ASSERT_TRUE(six.ok()) << six.error().message;
  EXPECT_EQ(matvec_split(*six, many, 5 * group_cols), 3u);  // 2 chunks a part: 3 (4 is no divisor)
  EXPECT_EQ(matvec_split(*six, many, 64 * group_cols), 6u);
  auto off = create_matvec_kernels(*ctx_, WeightFormat::kQ4_0, false, shape(4, 4, 4, 2, 1, 1));
  ASSERT_TRUE(off.ok()) << off.error().message;
  EXPECT_EQ(matvec_split(*off, 16, 64 * group_cols), 1u);
}

// The fields the code leaves 0 take the device's and format's defaults (matvec_shape.cpp): on
// a CPU device (lavapipe) 4 rows a subgroup for plain products, 2 for gate-up, one vector a
// round; Q8_0/Q4_0 on 2 subgroups, unsplit; a field set in code stays.
TEST_F(GpuMatvecOp, ShapeDefaultsFillWhatTheCodeLeavesZero) {
  ASSERT_EQ(ctx_->info().type, VK_PHYSICAL_DEVICE_TYPE_CPU) << "the defaults below are a CPU's";
  auto q4 = create_matvec_kernels(*ctx_, WeightFormat::kQ4_0, false, {});
  auto q8 = create_matvec_kernels(*ctx_, WeightFormat::kQ8_0, false, {});
  auto gu = create_matvec_kernels(*ctx_, WeightFormat::kQ4_0, true, {});
  auto set = create_matvec_kernels(*ctx_, WeightFormat::kQ4_0, false, shape(0, 2, 0, 0, 0, 0));
  ASSERT_TRUE(q4.ok() && q8.ok() && gu.ok() && set.ok());
  EXPECT_EQ(q4->tuning.rows_per_subgroup, 4u);
  EXPECT_EQ(q4->tuning.subgroups_per_group, 2u);
  EXPECT_EQ(q4->tuning.max_split, 1u);
  EXPECT_EQ(q4->tuning.vec_unroll, 1u);
  EXPECT_EQ(q8->tuning.rows_per_subgroup, 4u);
  EXPECT_EQ(gu->tuning.rows_per_subgroup, 2u);
  EXPECT_EQ(gu->tuning.vec_unroll, 1u);
  EXPECT_EQ(gu->tuning.subgroups_per_group, 2u);
  EXPECT_EQ(gu->tuning.max_split, 1u);
  EXPECT_EQ(set->tuning.rows_per_subgroup, 2u);  // set in code
  // Per-product shapes (the HalvedOnSmallGrids setting's cases check the products): 4 rows a
  // subgroup while the grid keeps 100 subgroups, then 2, then 1; 2 vectors a round where they
  // divide the row's chunks (Q4_0: 8 vectors per 256 columns, chunks of subgroup-size vectors),
  // else 1.
  auto halved = create_matvec_kernels(*ctx_, WeightFormat::kQ4_0, false, halved_on_small_grids());
  ASSERT_TRUE(halved.ok());
  EXPECT_EQ(halved->one_token_variants.size(), 5u);  // 3 row counts x 2 unrolls, less one_token
  const uint32_t lanes = halved->subgroup_size;
  const int64_t even = 256 * int64_t(lanes) / 8 * 2, odd = even / 2 * 3;  // 2 and 3 chunks
  auto shape_of = [&](int64_t rows, int64_t cols) {
    const OneTokenShape s = matvec_one_token_shape(*halved, rows, cols);
    EXPECT_NE(s.pipeline, nullptr);
    return std::make_pair(s.rows_per_subgroup, s.vec_unroll);
  };
  EXPECT_EQ(shape_of(1536, even), std::make_pair(4u, 2u));
  EXPECT_EQ(matvec_one_token_shape(*halved, 1536, even).pipeline, halved->one_token.get());
  EXPECT_EQ(shape_of(400, odd), std::make_pair(4u, 1u));
  EXPECT_EQ(shape_of(396, even), std::make_pair(2u, 2u));
  EXPECT_EQ(shape_of(257, odd), std::make_pair(2u, 1u));
  EXPECT_EQ(shape_of(64, even), std::make_pair(1u, 2u));
  EXPECT_EQ(shape_of(64, odd), std::make_pair(1u, 1u));
  // Q4_0's default one vector a round: the halved shapes are still made.
  MatvecTuning one = halved_on_small_grids();
  one.vec_unroll = 1;
  auto single = create_matvec_kernels(*ctx_, WeightFormat::kQ4_0, false, one);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->one_token_variants.size(), 2u);
  EXPECT_EQ(matvec_one_token_shape(*single, 64, odd).rows_per_subgroup, 1u);
  // A kernel that may split rows (no variants) keeps its own shape for a product it leaves
  // unsplit, whatever the row's chunks.
  auto splits = create_matvec_kernels(*ctx_, WeightFormat::kF32, false, shape(4, 2, 0, 4, 4, 1));
  ASSERT_TRUE(splits.ok());
  EXPECT_TRUE(splits->one_token_variants.empty());
  for (int64_t cols : {int64_t(5), int64_t(4) * lanes * 3}) {
    const OneTokenShape s = matvec_one_token_shape(*splits, 7, cols);
    EXPECT_EQ(s.pipeline, splits->one_token.get());
    EXPECT_EQ(s.vec_unroll, 4u);
  }
  // Where the device does not say its cores (lavapipe), nothing narrows by default.
  if (ctx_->info().compute_cores == 0) {
    EXPECT_EQ(q4->tuning.min_grid_subgroups, 0u);
    EXPECT_EQ(matvec_one_token_shape(*q4, 64, even).rows_per_subgroup, 4u);
  }
  // And the default kernels compute the product.
  check_matvec(*ctx_, WeightFormat::kQ4_0, 45, 1280, 1);
  check_matvec(*ctx_, WeightFormat::kQ8_0, 45, 1280, 2);
}
}  // namespace
}  // namespace infer::gpu
