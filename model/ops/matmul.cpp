// matmul: the plain reference, the portable kernel, and the startup choice of the fast path.
#include "model/ops/matmul.h"

#include <vector>

#include "base/check.h"
#include "model/ops/matmul_kernels.h"
#include "model/thread_pool.h"

namespace infer {

void matmul_reference(const Matrix& w, const float* x, int64_t T, float* y) {
  std::vector<float> row(size_t(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w, r, row.data());
    for (int64_t t = 0; t < T; ++t) {
      const float* xt = x + t * w.cols;
      double sum = 0.0;
      for (int64_t c = 0; c < w.cols; ++c) sum += double(row[size_t(c)]) * double(xt[c]);
      y[t * w.rows + r] = float(sum);
    }
  }
}

void matmul_rows_generic(const Matrix& w, const float* x, int64_t T, float* y, int64_t r0,
                         int64_t r1) {
  // Dequantizes a slice of one row at a time onto the stack and dots it with every token.
  constexpr int64_t kSlice = 1024;  // a multiple of 32, so quantized slices hold whole blocks
  float buf[kSlice];
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t t = 0; t < T; ++t) y[t * w.rows + r] = 0.0f;
    for (int64_t c0 = 0; c0 < w.cols; c0 += kSlice) {
      const int64_t n = w.cols - c0 < kSlice ? w.cols - c0 : kSlice;
      const Matrix slice{w.format, 1, n, w.row(r) + row_bytes(w.format, c0)};
      dequantize_row(slice, 0, buf);
      for (int64_t t = 0; t < T; ++t) {
        const float* xt = x + t * w.cols + c0;
        float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        int64_t c = 0;
        for (; c + 4 <= n; c += 4) {
          s0 += buf[c] * xt[c];
          s1 += buf[c + 1] * xt[c + 1];
          s2 += buf[c + 2] * xt[c + 2];
          s3 += buf[c + 3] * xt[c + 3];
        }
        for (; c < n; ++c) s0 += buf[c] * xt[c];
        y[t * w.rows + r] += (s0 + s1) + (s2 + s3);
      }
    }
  }
}

namespace {

std::vector<MatmulKernel> supported_kernels() {
  std::vector<MatmulKernel> k;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    k.push_back({"avx512", matmul_rows_avx512});
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    k.push_back({"avx2", matmul_rows_avx2});
  }
#endif
  k.push_back({"generic", matmul_rows_generic});
  return k;
}

const std::vector<MatmulKernel>& kernels() {
  static const std::vector<MatmulKernel> k = supported_kernels();
  return k;
}

}  // namespace

std::span<const MatmulKernel> matmul_kernels() { return kernels(); }

const char* matmul_isa() { return kernels().front().name; }

void matmul_with(const MatmulKernel& k, const Matrix& w, const float* x, int64_t T, float* y,
                 ThreadPool& pool) {
  INFER_DCHECK(w.data != nullptr && T >= 0, "matmul on an empty matrix");
  pool.parallel_for(
      w.rows, [&](int64_t r0, int64_t r1) { k.rows(w, x, T, y, r0, r1); }, kMatmulRowAlign);
}

void matmul(const Matrix& w, const float* x, int64_t T, float* y, ThreadPool& pool) {
  static const MatmulKernel& best = kernels().front();
  matmul_with(best, w, x, T, y, pool);
}

void matmul_rows(const Matrix& w, const float* x, int64_t T, float* y, int64_t r0, int64_t r1) {
  static const MatmulKernel& best = kernels().front();
  best.rows(w, x, T, y, r0, r1);
}

void matmul_multi(std::span<const MatmulJob> jobs, int64_t T, ThreadPool& pool) {
  int64_t total = 0;
  for (const MatmulJob& j : jobs) total += j.w->rows;
  pool.parallel_for(
      total,
      [&](int64_t b, int64_t e) {
        int64_t base = 0;  // first row of job j in the concatenation
        for (const MatmulJob& j : jobs) {
          const int64_t r0 = b > base ? b - base : 0;
          const int64_t r1 = e - base < j.w->rows ? e - base : j.w->rows;
          if (r0 < r1) matmul_rows(*j.w, j.x, T, j.y, r0, r1);
          base += j.w->rows;
        }
      },
      kMatmulRowAlign);
}

}  // namespace infer
