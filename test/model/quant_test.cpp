// Q8_0/Q4_0 blocks against hand-computed GGML bytes, round-trip error bounds, and the matrix-level
// helpers (row_bytes, dequantize_row, quantize_matrix on a thread pool).
#include "model/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "model/matrix.h"
#include "model/thread_pool.h"

namespace infer {
namespace {

std::vector<float> random_floats(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& f : v) f = dist(rng);
  return v;
}

TEST(QuantQ8, HandComputedBlockMatchesGgmlBytes) {
  // amax = 127, so d = 1 and id = 1: the codes are roundf(x), halves away from zero.
  float x[32] = {127, -127, 0.4f, 0.5f, -0.5f, 0.6f, 1.49f, 2.5f, -2.5f, -3.7f, 100.2f};
  const int8_t want[32] = {127, -127, 0, 1, -1, 1, 1, 3, -3, -4, 100};
  BlockQ8_0 b;
  quantize_row_q8_0(x, &b, 32);
  EXPECT_EQ(b.d, 0x3c00);  // fp16 1.0
  for (int j = 0; j < 32; ++j) EXPECT_EQ(b.qs[j], want[j]) << "weight " << j;
}

TEST(QuantQ8, ScaleIsAmaxOver127) {
  // amax = 63.5: d = 0.5 (fp16 0x3800), id = 2.
  float x[32] = {-63.5f, -0.25f, 0.75f, 10.0f, 0.2f};
  const int8_t want[5] = {-127, -1, 2, 20, 0};
  BlockQ8_0 b;
  quantize_row_q8_0(x, &b, 32);
  EXPECT_EQ(b.d, 0x3800);
  for (int j = 0; j < 5; ++j) EXPECT_EQ(b.qs[j], want[j]) << "weight " << j;
  float back[32];
  dequantize_row_q8_0(&b, back, 32);
  EXPECT_EQ(back[0], -63.5f);
  EXPECT_EQ(back[3], 10.0f);
  EXPECT_EQ(back[31], 0.0f);
}

TEST(QuantQ4, HandComputedBlockMatchesGgmlBytes) {
  // The largest magnitude is -8, so d = -8 / -8 = 1, id = 1 and q = min(15, int(x + 8.5)).
  float x[32] = {};
  const float lo[8] = {-8, 7, 7.9f, 0, -0.5f, -0.6f, 0.49f, 0.5f};
  const int lo_q[8] = {0, 15, 15, 8, 8, 7, 8, 9};
  const float hi[8] = {-7.6f, 1, -1, 3.2f, 0, 0, 0, -2};
  const int hi_q[8] = {0, 9, 7, 11, 8, 8, 8, 6};
  for (int j = 0; j < 8; ++j) x[j] = lo[j], x[16 + j] = hi[j];
  BlockQ4_0 b;
  quantize_row_q4_0(x, &b, 32);
  EXPECT_EQ(b.d, 0x3c00);  // fp16 1.0
  for (int j = 0; j < 8; ++j) EXPECT_EQ(b.qs[j], lo_q[j] | hi_q[j] << 4) << "byte " << j;
  for (int j = 8; j < 16; ++j) EXPECT_EQ(b.qs[j], 0x88) << "byte " << j;  // zeros -> 8, 8
}

TEST(QuantQ4, PositiveMaxGivesNegativeScaleAndClamps) {
  // max = +16 (first of the two largest magnitudes), d = 16 / -8 = -2, id = -0.5:
  // 16 -> 0, -16 -> int(16.5) = 16 -> clamped to 15, 1 -> 8, -1 -> 9, -14 -> 15.
  float x[32] = {16, -16, 1, -1, -14};
  BlockQ4_0 b;
  quantize_row_q4_0(x, &b, 32);
  EXPECT_EQ(b.d, 0xc000);  // fp16 -2.0
  EXPECT_EQ(b.qs[0], 0x80);
  EXPECT_EQ(b.qs[1], 0x8f);
  EXPECT_EQ(b.qs[2], 0x88);
  EXPECT_EQ(b.qs[3], 0x89);
  EXPECT_EQ(b.qs[4], 0x8f);
  float back[32];
  dequantize_row_q4_0(&b, back, 32);
  EXPECT_EQ(back[0], 16.0f);
  EXPECT_EQ(back[1], -14.0f);  // the clamped end: (15 - 8) * -2
  EXPECT_EQ(back[3], -2.0f);
}

TEST(QuantQ8, ZeroBlockHasZeroScaleAndCodes) {
  const float x[32] = {};
  BlockQ8_0 b;
  std::memset(&b, 0xff, sizeof b);
  quantize_row_q8_0(x, &b, 32);
  EXPECT_EQ(b.d, 0);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(b.qs[j], 0);
}

TEST(QuantQ4, ZeroBlockHasZeroScaleAndMidCodes) {
  const float x[32] = {};
  BlockQ4_0 b;
  quantize_row_q4_0(x, &b, 32);
  EXPECT_EQ(b.d, 0x8000);  // -0.0 = 0 / -8, as GGML stores it
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], 0x88);
  float back[32];
  dequantize_row_q4_0(&b, back, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(back[j], 0.0f);
}

// |x - deq(x)| <= half a step (d/2) plus the fp16 rounding of d (relative 2^-11) times the
// largest code (127); the scale is computed per block from the block's own amax.
TEST(QuantQ8, RoundTripErrorIsWithinHalfAStep) {
  const int64_t n = 32 * 64;
  const auto x = random_floats(n, 0.05f, 1);
  std::vector<BlockQ8_0> q(n / 32);
  std::vector<float> back(n);
  quantize_row_q8_0(x.data(), q.data(), n);
  dequantize_row_q8_0(q.data(), back.data(), n);
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[b * 32 + j]));
    const float d = amax / 127;
    const float bound = 0.5f * d * (1 + 1e-6f) + 127 * d * std::ldexp(1.0f, -11);
    for (int j = 0; j < 32; ++j) {
      ASSERT_LE(std::fabs(x[b * 32 + j] - back[b * 32 + j]), bound) << "block " << b << " " << j;
    }
  }
}

// Q4 is one-sided: the extreme maps to -8 exactly, the far side can reach +8 steps, clamped to +7
// (a full step of error); elsewhere half a step. Plus fp16 rounding of d times 8 steps.
TEST(QuantQ4, RoundTripErrorIsWithinOneStep) {
  const int64_t n = 32 * 64;
  const auto x = random_floats(n, 0.05f, 2);
  std::vector<BlockQ4_0> q(n / 32);
  std::vector<float> back(n);
  quantize_row_q4_0(x.data(), q.data(), n);
  dequantize_row_q4_0(q.data(), back.data(), n);
  double err2 = 0, x2 = 0;
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[b * 32 + j]));
    const float d = amax / 8;
    const float bound = d * (1 + 1e-6f) + 8 * d * std::ldexp(1.0f, -11);
    for (int j = 0; j < 32; ++j) {
      const float e = std::fabs(x[b * 32 + j] - back[b * 32 + j]);
      ASSERT_LE(e, bound) << "block " << b << " " << j;
      err2 += double(e) * e;
      x2 += double(x[b * 32 + j]) * x[b * 32 + j];
    }
  }
  // Gaussian weights: 4 bits leave a normalised MSE of about 1%; far more means a packing bug.
  EXPECT_LT(err2 / x2, 0.02);
}

TEST(QuantFormats, RowBytesAndNames) {
  EXPECT_EQ(row_bytes(WeightFormat::kF32, 7), 28u);
  EXPECT_EQ(row_bytes(WeightFormat::kBF16, 7), 14u);
  EXPECT_EQ(row_bytes(WeightFormat::kQ8_0, 64), 68u);
  EXPECT_EQ(row_bytes(WeightFormat::kQ4_0, 64), 36u);
  EXPECT_STREQ(weight_format_name(WeightFormat::kQ4_0), "q4_0");
  EXPECT_STREQ(weight_format_name(WeightFormat::kBF16), "bf16");
}

TEST(QuantizeMatrix, AllThreadsGiveTheSameBytesAsRowByRow) {
  const int64_t rows = 37, cols = 96;
  const auto x = random_floats(size_t(rows * cols), 1.0f, 3);
  const Matrix src{WeightFormat::kF32, rows, cols, reinterpret_cast<const uint8_t*>(x.data())};
  ThreadPool pool(2);
  for (WeightFormat to : {WeightFormat::kQ8_0, WeightFormat::kQ4_0, WeightFormat::kBF16}) {
    SCOPED_TRACE(weight_format_name(to));
    const size_t stride = row_bytes(to, cols);
    std::vector<uint8_t> got(rows * stride, 0xab), want(rows * stride);
    EXPECT_EQ(quantize_matrix(src, to, got.data(), pool), rows * stride);
    for (int64_t r = 0; r < rows; ++r) {
      uint8_t* dst = want.data() + r * stride;
      const float* row = x.data() + r * cols;
      if (to == WeightFormat::kQ8_0)
        quantize_row_q8_0(row, reinterpret_cast<BlockQ8_0*>(dst), cols);
      if (to == WeightFormat::kQ4_0)
        quantize_row_q4_0(row, reinterpret_cast<BlockQ4_0*>(dst), cols);
      if (to == WeightFormat::kBF16) {
        for (int64_t c = 0; c < cols; ++c) {
          const bf16 h = f32_to_bf16(row[c]);
          std::memcpy(dst + 2 * c, &h, 2);
        }
      }
    }
    EXPECT_EQ(got, want);
  }
}

TEST(QuantizeMatrix, FromBf16DequantizesEachRowFirst) {
  const int64_t rows = 5, cols = 64;
  const auto x = random_floats(size_t(rows * cols), 1.0f, 4);
  std::vector<bf16> h(x.size());
  std::vector<float> rounded(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = f32_to_bf16(x[i]), rounded[i] = bf16_to_f32(h[i]);
  const Matrix src{WeightFormat::kBF16, rows, cols, reinterpret_cast<const uint8_t*>(h.data())};
  ThreadPool pool(2);
  std::vector<uint8_t> got(rows * row_bytes(WeightFormat::kQ8_0, cols));
  quantize_matrix(src, WeightFormat::kQ8_0, got.data(), pool);
  std::vector<BlockQ8_0> want(rows * cols / 32);
  quantize_row_q8_0(rounded.data(), want.data(), rows * cols);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0);
}

TEST(QuantDequantizeRow, ReadsEveryFormat) {
  const int64_t cols = 64;
  const auto x = random_floats(size_t(2 * cols), 1.0f, 5);
  ThreadPool pool(1);
  const Matrix f32{WeightFormat::kF32, 2, cols, reinterpret_cast<const uint8_t*>(x.data())};
  std::vector<float> out(cols);
  dequantize_row(f32, 1, out.data());
  for (int64_t c = 0; c < cols; ++c) EXPECT_EQ(out[c], x[cols + c]);
  for (WeightFormat to : {WeightFormat::kBF16, WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
    SCOPED_TRACE(weight_format_name(to));
    std::vector<uint8_t> buf(2 * row_bytes(to, cols));
    quantize_matrix(f32, to, buf.data(), pool);
    const Matrix m{to, 2, cols, buf.data()};
    dequantize_row(m, 1, out.data());
    std::vector<float> want(cols);
    const uint8_t* row = m.row(1);
    if (to == WeightFormat::kBF16) {
      for (int64_t c = 0; c < cols; ++c)
        want[c] = bf16_to_f32(reinterpret_cast<const bf16*>(row)[c]);
    } else if (to == WeightFormat::kQ8_0) {
      dequantize_row_q8_0(reinterpret_cast<const BlockQ8_0*>(row), want.data(), cols);
    } else {
      dequantize_row_q4_0(reinterpret_cast<const BlockQ4_0*>(row), want.data(), cols);
    }
    EXPECT_EQ(out, want);
  }
}

}  // namespace
}  // namespace infer
