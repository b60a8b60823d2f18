// Every matmul kernel this CPU runs (avx512, avx2, generic) against matmul_reference, for every
// weight format, over ragged sizes, several token counts and 1 or 2 threads.
#include "model/ops/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "base/half.h"
#include "model/ops/matmul_kernels.h"
#include "model/quant.h"
#include "model/thread_pool.h"

namespace infer {
namespace {

// A weight matrix in `format` built from Gaussian values, stored one byte past an aligned
// boundary so no kernel relies on aligned rows.
struct TestMatrix {
  std::vector<uint8_t> bytes;
  Matrix m;
  TestMatrix(WeightFormat format, int64_t rows, int64_t cols, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> f(size_t(rows * cols));
    for (auto& v : f) v = dist(rng);
    const Matrix src{WeightFormat::kF32, rows, cols, reinterpret_cast<const uint8_t*>(f.data())};
    const size_t n = size_t(rows) * row_bytes(format, cols);
    bytes.resize(n + 2);
    ThreadPool pool(1);
    quantize_matrix(src, format, bytes.data() + 2, pool);
    m = Matrix{format, rows, cols, bytes.data() + 2};
  }
};

struct Case {
  const char* kernel;
  WeightFormat format;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string k = info.param.kernel;
  k[0] = char(std::toupper(k[0]));
  switch (info.param.format) {
    case WeightFormat::kF32:
      return k + "F32";
    case WeightFormat::kBF16:
      return k + "Bf16";
    case WeightFormat::kQ8_0:
      return k + "Q8";
    case WeightFormat::kQ4_0:
      return k + "Q4";
  }
  return k;
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const MatmulKernel& k : matmul_kernels()) {
    for (WeightFormat f :
         {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
      cases.push_back({k.name, f});
    }
  }
  return cases;
}

const MatmulKernel& kernel_named(const char* name) {
  for (const MatmulKernel& k : matmul_kernels()) {
    if (std::strcmp(k.name, name) == 0) return k;
  }
  ADD_FAILURE() << "no kernel " << name;
  return matmul_kernels().front();
}

class MatmulKernelTest : public testing::TestWithParam<Case> {};

// Tolerance: the kernel sums n = cols products in f32 (vector lanes, then a tree, then across
// K blocks); the reference sums the same dequantized products in double. A recursive f32 sum of n
// terms errs by at most about n·u·Σ|w·x| (u = 2^-24); the quantized kernels also round d·(q·x)
// instead of (d·q)·x (AVX2 Q4_0: d·(q·x - 8·Σx), q the raw nibbles), a few u more per term.
// A dropped or doubled term (≈ Σ|w·x|/n) is far larger for every n here (n·u < 1.3e-4 while
// 1/n > 4.8e-4). Quantized sizes reach 2080 columns: 65 blocks, past one 64-block scale chunk.
// Kernels that quantize x (avx512vnni) sum exact integer block dots, each times d_x then d_w
// (2 roundings), in lanes of at most 65/2 terms and a 16-lane tree: well inside the same bound.
// Their T = 64 at 2080 columns also spans two chunks of their quantized-x buffer.
TEST_P(MatmulKernelTest, MatchesReferenceOverSizeSweep) {
  const MatmulKernel& kernel = kernel_named(GetParam().kernel);
  const WeightFormat format = GetParam().format;
  const bool quantized = format == WeightFormat::kQ8_0 || format == WeightFormat::kQ4_0;
  const std::vector<int64_t> cols_sweep = quantized
                                              ? std::vector<int64_t>{32, 64, 96, 544, 1056, 2080}
                                              : std::vector<int64_t>{1, 7, 16, 33, 100, 515, 1030};
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  uint32_t seed = 1;
  for (int64_t rows : {1, 5, 19, 45, 70}) {
    for (int64_t cols : cols_sweep) {
      const TestMatrix w(format, rows, cols, seed++);
      for (int64_t T : {1, 3, 17, 64}) {
        // x one float past an aligned start.
        std::vector<float> xbuf(size_t(T * cols) + 1);
        for (auto& v : xbuf) v = dist(rng);
        const float* x = xbuf.data() + 1;
        // Kernels that quantize x for Q8_0/Q4_0 are held to the integer contract: the same Q8_0
        // x, exact block dots, so only the f32 scale products and sums differ. Σ|w·x| is then
        // over the dequantized x.
        const bool q8_x = quantized && kernel.quantizes_x;
        std::vector<float> want(size_t(T * rows));
        std::vector<float> xd(x, x + T * cols);
        if (q8_x) {
          matmul_reference_q8_x(w.m, x, T, want.data());
          std::vector<BlockQ8_0> xq(size_t(T * cols / kQK));
          for (int64_t t = 0; t < T; ++t) {
            quantize_row_q8_0(x + t * cols, xq.data() + t * cols / kQK, cols);
            dequantize_row_q8_0(xq.data() + t * cols / kQK, xd.data() + t * cols, cols);
          }
        } else {
          matmul_reference(w.m, x, T, want.data());
        }
        // The bound's Σ|w·x| per output.
        std::vector<float> row(static_cast<size_t>(cols));
        std::vector<double> abs_sum(size_t(T * rows));
        for (int64_t r = 0; r < rows; ++r) {
          dequantize_row(w.m, r, row.data());
          for (int64_t t = 0; t < T; ++t) {
            double s = 0;
            for (int64_t c = 0; c < cols; ++c) s += std::fabs(double(row[c]) * xd[t * cols + c]);
            abs_sum[size_t(t * rows + r)] = s;
          }
        }
        for (int threads : {1, 2}) {
          SCOPED_TRACE(testing::Message() << "rows " << rows << " cols " << cols << " T " << T
                                          << " threads " << threads);
          ThreadPool pool(threads);
          // Garbage in y: the kernel must overwrite, not accumulate.
          std::vector<float> got(size_t(T * rows), std::numeric_limits<float>::quiet_NaN());
          matmul_with(kernel, w.m, x, T, got.data(), pool);
          const double u = std::ldexp(1.0, -24);
          for (size_t i = 0; i < got.size(); ++i) {
            const double tol = (double(cols) + 8) * u * abs_sum[i] + 1e-30;
            ASSERT_NEAR(got[i], want[i], tol) << "t " << i / rows << " r " << i % rows;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(MatmulAllKernels, MatmulKernelTest, testing::ValuesIn(all_cases()),
                         case_name);

TEST(Matmul, UsesTheBestKernelThisCpuHas) {
  EXPECT_STREQ(matmul_isa(), matmul_kernels().front().name);
  // The portable kernels close the list, f32 then int8: never the fastest where another runs.
  const auto kernels = matmul_kernels();
  ASSERT_GE(kernels.size(), 2u);
  EXPECT_STREQ(kernels[kernels.size() - 2].name, "generic");
  EXPECT_STREQ(kernels.back().name, "generic_q8_x");
#if defined(__x86_64__)
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                     __builtin_cpu_supports("avx512vl");
  if (avx512 && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi")) {
    EXPECT_STREQ(matmul_isa(), "avx512vnni");
  } else if (avx512) {
    EXPECT_STREQ(matmul_isa(), "avx512");
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_STREQ(matmul_isa(), "avx2");
  }
#endif
}

// The activation mode picks the first kernel of its contract: kInt8 the integer one on every CPU
// (the portable one where the CPU has none), kF32 never one that quantizes x.
TEST(Matmul, ActivationModeChoosesTheKernelsContract) {
  const auto quantizes = [] {
    for (const MatmulKernel& k : matmul_kernels()) {
      if (std::strcmp(k.name, matmul_isa()) == 0) return k.quantizes_x;
    }
    ADD_FAILURE() << "no kernel " << matmul_isa();
    return false;
  };
  set_matmul_activations(MatmulActivations::kInt8);
  EXPECT_TRUE(quantizes()) << matmul_isa();
  set_matmul_activations(MatmulActivations::kF32);
  EXPECT_FALSE(quantizes()) << matmul_isa();
  set_matmul_activations(MatmulActivations::kFastest);
  EXPECT_STREQ(matmul_isa(), matmul_kernels().front().name);
}

TEST(Matmul, DefaultPathMatchesReference) {
  const TestMatrix w(WeightFormat::kBF16, 33, 200, 11);
  std::vector<float> x(3 * 200);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i));
  std::vector<float> got(3 * 33), want(3 * 33);
  ThreadPool pool(2);
  matmul(w.m, x.data(), 3, got.data(), pool);
  matmul_reference(w.m, x.data(), 3, want.data());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4f) << i;
}

// kF16 (the CPU stand-in for the GPU's f16-operand prefill): products of kF16MinTokens tokens or
// more, alone or through matmul_multi, see x (and W: bf16 here, exact in f16) rounded to f16 (the
// reference on rounded x, to f32 sum order); shorter ones see x as it is (values 1 + i·2^-20
// that f16 cannot hold).
TEST(Matmul, F16ModeRoundsPrefillActivations) {
  const TestMatrix w(WeightFormat::kBF16, 20, 64, 31);
  ThreadPool pool(2);
  set_matmul_activations(MatmulActivations::kF16);
  for (int64_t T : {kF16MinTokens - 1, kF16MinTokens}) {
    std::vector<float> x(size_t(T * 64)), rounded(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = (i % 2 ? -1.0f : 1.0f) * (1.0f + std::ldexp(float(i % 512), -20)) * std::cos(float(i));
      rounded[i] = fp16_to_f32(f32_to_fp16(x[i]));
    }
    const bool f16 = T >= kF16MinTokens;
    std::vector<float> got(size_t(T * 20)), multi(got.size()), want(got.size());
    matmul(w.m, x.data(), T, got.data(), pool);
    const MatmulJob job{&w.m, x.data(), multi.data()};
    matmul_multi(std::span<const MatmulJob>(&job, 1), T, pool);
    matmul_reference(w.m, f16 ? rounded.data() : x.data(), T, want.data());
    std::vector<float> other(got.size());  // the reference on the other x: far from got
    matmul_reference(w.m, f16 ? x.data() : rounded.data(), T, other.data());
    float apart = 0.0f;
    for (size_t i = 0; i < got.size(); ++i) apart = std::max(apart, std::fabs(got[i] - other[i]));
    EXPECT_GT(apart, 1e-4f) << "T " << T;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 2e-5f) << "T " << T << " output " << i;
      EXPECT_NEAR(multi[i], want[i], 2e-5f) << "T " << T << " output " << i;
    }
  }
  set_matmul_activations(MatmulActivations::kFastest);
}

// matmul_multi splits the concatenated rows of several matrices over the pool in one call, so a
// thread's range can start, end or pass through any of them (ragged row counts, 1 or 3 tokens):
// each row is computed as matmul() computes it. Decode (T = 1) gives the same bits; batched rows
// may differ in the order of the final horizontal sums (4-row tiles vs the ragged edge).
TEST(Matmul, MultiMatchesOneMatmulPerMatrix) {
  for (WeightFormat format : {WeightFormat::kQ8_0, WeightFormat::kQ4_0, WeightFormat::kBF16}) {
    const TestMatrix a(format, 45, 96, 21), b(format, 5, 96, 22), c(format, 19, 96, 23);
    for (int64_t T : {1, 3}) {
      std::vector<float> x(size_t(T * 96));
      for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(float(i));
      for (int threads : {1, 2, 3}) {
        SCOPED_TRACE(testing::Message() << "T " << T << " threads " << threads);
        ThreadPool pool(threads);
        std::vector<float> ya(size_t(T * 45)), yb(size_t(T * 5)), yc(size_t(T * 19));
        const MatmulJob jobs[] = {{&a.m, x.data(), ya.data()},
                                  {&b.m, x.data(), yb.data()},
                                  {&c.m, x.data(), yc.data()}};
        matmul_multi(jobs, T, pool);
        for (const MatmulJob& j : jobs) {
          std::vector<float> want(size_t(T * j.w->rows));
          matmul(*j.w, x.data(), T, want.data(), pool);
          for (size_t i = 0; i < want.size(); ++i) {
            ASSERT_NEAR(j.y[i], want[i], T == 1 ? 0.0f : 1e-5f * (1.0f + std::fabs(want[i]))) << i;
          }
        }
      }
    }
  }
}

// matmul_rows computes exactly the rows asked for, as matmul() does, on any split (same bits for
// T = 1, same sums up to the order of the final horizontal adds for batched rows).
TEST(Matmul, RowsMatchMatmulOnAnySplit) {
  const TestMatrix w(WeightFormat::kQ8_0, 70, 64, 24);
  std::vector<float> x(3 * 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i) * 0.3f);
  ThreadPool pool(1);
  for (int64_t T : {1, 3}) {
    std::vector<float> want(size_t(T * 70));
    matmul(w.m, x.data(), T, want.data(), pool);
    std::vector<float> got(want.size(), std::numeric_limits<float>::quiet_NaN());
    const int64_t bounds[] = {0, 7, 33, 64, 70};  // ragged ranges, none aligned to a row group
    for (size_t k = 0; k + 1 < std::size(bounds); ++k) {
      matmul_rows(w.m, x.data(), T, got.data(), bounds[k], bounds[k + 1]);
    }
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], T == 1 ? 0.0f : 1e-5f * (1.0f + std::fabs(want[i]))) << i;
    }
  }
}

// Kernels that quantize x do it per token row, the same way for any T, chunking and row split:
// prefill (T tokens at once) gives each token decode's bits (T = 1), on 1 or 2 threads.
TEST(Matmul, QuantizedXBatchMatchesTokenByToken) {
  for (const MatmulKernel& k : matmul_kernels()) {
    if (!k.quantizes_x) continue;
    for (WeightFormat format : {WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
      const TestMatrix w(format, 37, 1568, 31);  // 49 blocks: one partial group either format
      const int64_t T = 70;
      std::vector<float> x(size_t(T * 1568));
      for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i) * 0.01f) * float(1 + i % 7);
      for (int threads : {1, 2}) {
        SCOPED_TRACE(testing::Message() << k.name << " threads " << threads);
        ThreadPool pool(threads);
        std::vector<float> batch(size_t(T * 37));
        matmul_with(k, w.m, x.data(), T, batch.data(), pool);
        for (int64_t t = 0; t < T; ++t) {
          std::vector<float> one(37);
          matmul_with(k, w.m, x.data() + t * 1568, 1, one.data(), pool);
          for (int64_t r = 0; r < 37; ++r) ASSERT_EQ(batch[size_t(t * 37 + r)], one[size_t(r)]);
        }
      }
    }
  }
}

// x is rounded as quantize_row_q8_0 rounds (roundf: ties away from zero, not to even): with
// amax = 127 the scale is 1, so x's halves are ties, and unit weight rows read back each q.
TEST(Matmul, QuantizedXRoundsTiesAwayFromZero) {
  std::vector<float> x(32);
  x[0] = 127.0f;
  for (int j = 1; j < 32; ++j) x[size_t(j)] = (j % 2 ? 1.0f : -1.0f) * (float(j) + 0.5f);
  std::vector<float> eye(32 * 32, 0.0f);
  for (int j = 0; j < 32; ++j) eye[size_t(j * 33)] = 1.0f;
  for (const MatmulKernel& k : matmul_kernels()) {
    if (!k.quantizes_x) continue;
    for (WeightFormat format : {WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
      std::vector<uint8_t> bytes(size_t(32) * row_bytes(format, 32));
      ThreadPool pool(1);
      quantize_matrix(Matrix{WeightFormat::kF32, 32, 32, reinterpret_cast<const uint8_t*>(eye.data())},
                      format, bytes.data(), pool);
      const Matrix w{format, 32, 32, bytes.data()};
      std::vector<float> got(32), want(32), unit(32);
      matmul_with(k, w, x.data(), 1, got.data(), pool);
      matmul_reference_q8_x(w, x.data(), 1, want.data());
      for (int j = 0; j < 32; ++j) {
        dequantize_row(w, j, unit.data());
        const float q = std::roundf(x[size_t(j)]);
        EXPECT_EQ(got[size_t(j)], want[size_t(j)]) << k.name << " j " << j;
        EXPECT_EQ(got[size_t(j)], unit[size_t(j)] * q) << k.name << " j " << j;
      }
    }
  }
}

TEST(Matmul, ZeroTokensWritesNothing) {
  const TestMatrix w(WeightFormat::kQ8_0, 4, 32, 12);
  float y = 42.0f;
  ThreadPool pool(2);
  matmul(w.m, nullptr, 0, &y, pool);
  EXPECT_EQ(y, 42.0f);
}

}  // namespace
}  // namespace infer
