// matmul: the plain reference, the portable kernel, and the startup choice of the fast path.
#include "model/ops/matmul.h"

#include <atomic>
#include <vector>

#include "base/check.h"
#include "base/half.h"
#include "model/ops/matmul_kernels.h"
#include "model/quant.h"
#include "model/thread_pool.h"

namespace infer {

namespace {

// Block b of Q8_0/Q4_0 row r against a Q8_0 block of x: the exact integer dot (at most
// 32 · 128 · 127 in magnitude) and, in *dw, the weights' scale.
int32_t block_dot_q8_x(const Matrix& w, int64_t r, int64_t b, const BlockQ8_0& xb, float* dw) {
  int32_t dot = 0;
  if (w.format == WeightFormat::kQ8_0) {
    const BlockQ8_0& wb = reinterpret_cast<const BlockQ8_0*>(w.row(r))[b];
    for (int j = 0; j < kQK; ++j) dot += int32_t(wb.qs[j]) * xb.qs[j];
    *dw = fp16_to_f32(wb.d);
    return dot;
  }
  const BlockQ4_0& wb = reinterpret_cast<const BlockQ4_0*>(w.row(r))[b];
  for (int j = 0; j < kQK / 2; ++j) {
    dot += (int32_t(wb.qs[j] & 15) - 8) * xb.qs[j];
    dot += (int32_t(wb.qs[j] >> 4) - 8) * xb.qs[j + kQK / 2];
  }
  *dw = fp16_to_f32(wb.d);
  return dot;
}

}  // namespace

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

void matmul_reference_q8_x(const Matrix& w, const float* x, int64_t T, float* y) {
  INFER_CHECK(w.format == WeightFormat::kQ8_0 || w.format == WeightFormat::kQ4_0,
              "matmul_reference_q8_x on a weight format that is not Q8_0 or Q4_0");
  const int64_t nb = w.cols / kQK;
  std::vector<BlockQ8_0> xq(size_t(T * nb));
  for (int64_t t = 0; t < T; ++t) quantize_row_q8_0(x + t * w.cols, xq.data() + t * nb, w.cols);
  for (int64_t r = 0; r < w.rows; ++r) {
    for (int64_t t = 0; t < T; ++t) {
      double sum = 0.0;
      for (int64_t b = 0; b < nb; ++b) {
        const BlockQ8_0& xb = xq[size_t(t * nb + b)];
        float dw = 0.0f;
        const int32_t dot = block_dot_q8_x(w, r, b, xb, &dw);
        sum += double(dot) * double(dw) * double(fp16_to_f32(xb.d));
      }
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

void matmul_rows_generic_q8_x(const Matrix& w, const float* x, int64_t T, float* y, int64_t r0,
                              int64_t r1) {
  if (w.format != WeightFormat::kQ8_0 && w.format != WeightFormat::kQ4_0) {
    matmul_rows_generic(w, x, T, y, r0, r1);
    return;
  }
  // Token by token, block by block: each block of x quantized once (on the stack, nothing
  // allocated) and met by every row of the range, so a row's sum runs over its blocks in order
  // whatever T or the split.
  const int64_t nb = w.cols / kQK;
  for (int64_t t = 0; t < T; ++t) {
    float* yt = y + t * w.rows;
    for (int64_t r = r0; r < r1; ++r) yt[r] = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
      BlockQ8_0 xb;
      quantize_row_q8_0(x + t * w.cols + b * kQK, &xb, kQK);
      const float dx = fp16_to_f32(xb.d);
      for (int64_t r = r0; r < r1; ++r) {
        float dw = 0.0f;
        const int32_t dot = block_dot_q8_x(w, r, b, xb, &dw);
        yt[r] += float(dot) * (dw * dx);
      }
    }
  }
}

namespace {

std::vector<MatmulKernel> supported_kernels() {
  std::vector<MatmulKernel> k;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                     __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma") &&
                     __builtin_cpu_supports("f16c");
  if (avx512 && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi")) {
    k.push_back({"avx512vnni", matmul_rows_avx512_vnni, true});
  }
  if (avx512) k.push_back({"avx512", matmul_rows_avx512});
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    k.push_back({"avx2", matmul_rows_avx2});
  }
#endif
  k.push_back({"generic", matmul_rows_generic});
  k.push_back({"generic_q8_x", matmul_rows_generic_q8_x, true});
  return k;
}

const std::vector<MatmulKernel>& kernels() {
  static const std::vector<MatmulKernel> k = supported_kernels();
  return k;
}

}  // namespace

std::span<const MatmulKernel> matmul_kernels() { return kernels(); }

namespace {

// The kernel matmul() runs: the fastest, or the fastest with f32 activations when asked.
std::atomic<const MatmulKernel*> g_active{nullptr};
// MatmulActivations::kF16: prefill-sized products round x to f16 first.
std::atomic<bool> g_round_f16{false};

// kF16's products of kF16MinTokens or more: W and x rounded to f16 (and back), summed in f32.
// A reference-speed path (tests size the GPU's f16-operand bound by it), not a fast one.
bool rounds_to_f16(int64_t T) {
  return g_round_f16.load(std::memory_order_relaxed) && T >= kF16MinTokens;
}
float to_f16_and_back(float v) { return fp16_to_f32(f32_to_fp16(v)); }

void matmul_f16_operands(const Matrix& w, const float* x, int64_t T, float* y, ThreadPool& pool) {
  std::vector<float> xr(size_t(T * w.cols));
  for (size_t i = 0; i < xr.size(); ++i) xr[i] = to_f16_and_back(x[i]);
  pool.parallel_for(w.rows, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(w.cols));
    for (int64_t r = r0; r < r1; ++r) {
      dequantize_row(w, r, row.data());
      for (float& v : row) v = to_f16_and_back(v);
      for (int64_t t = 0; t < T; ++t) {
        float sum = 0.0f;
        for (int64_t c = 0; c < w.cols; ++c) sum += row[size_t(c)] * xr[size_t(t * w.cols + c)];
        y[t * w.rows + r] = sum;
      }
    }
  });
}

const MatmulKernel& active_kernel() {
  const MatmulKernel* k = g_active.load(std::memory_order_relaxed);
  return k != nullptr ? *k : kernels().front();
}

}  // namespace

const char* matmul_isa() { return active_kernel().name; }

void set_matmul_activations(MatmulActivations mode) {
  const MatmulKernel* chosen = &kernels().front();
  if (mode != MatmulActivations::kFastest) {
    const bool quantize = mode == MatmulActivations::kInt8;
    for (const MatmulKernel& k : kernels()) {
      if (k.quantizes_x == quantize) {
        chosen = &k;
        break;
      }
    }
  }
  g_active.store(chosen, std::memory_order_relaxed);
  g_round_f16.store(mode == MatmulActivations::kF16, std::memory_order_relaxed);
}

void matmul_with(const MatmulKernel& k, const Matrix& w, const float* x, int64_t T, float* y,
                 ThreadPool& pool) {
  INFER_DCHECK(w.data != nullptr && T >= 0, "matmul on an empty matrix");
  if (rounds_to_f16(T)) return matmul_f16_operands(w, x, T, y, pool);
  pool.parallel_for(
      w.rows, [&](int64_t r0, int64_t r1) { k.rows(w, x, T, y, r0, r1); }, kMatmulRowAlign);
}

void matmul(const Matrix& w, const float* x, int64_t T, float* y, ThreadPool& pool) {
  matmul_with(active_kernel(), w, x, T, y, pool);
}

void matmul_rows(const Matrix& w, const float* x, int64_t T, float* y, int64_t r0, int64_t r1) {
  active_kernel().rows(w, x, T, y, r0, r1);
}

void matmul_multi(std::span<const MatmulJob> jobs, int64_t T, ThreadPool& pool) {
  if (rounds_to_f16(T)) {
    for (const MatmulJob& j : jobs) matmul_f16_operands(*j.w, j.x, T, j.y, pool);
    return;
  }
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
