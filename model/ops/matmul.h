// y = x · wᵀ for every weight format (model/matrix.h): the plain reference and the fast path,
// which picks AVX-512, AVX2 or portable C++ once at startup by CPUID.
#pragma once

#include <cstdint>
#include <span>

#include "model/matrix.h"

namespace infer {

class ThreadPool;

// x: [T, cols] f32 row-major, w: [rows, cols] (any format) -> y: [T, rows] f32:
//   y[t][r] = sum_c w[r][c] · x[t][c]
// Weights are dequantized on the fly and activations stay f32, sums f32; except that on CPUs with
// AVX512-VNNI, Q8_0/Q4_0 weights meet x quantized to Q8_0 per token row (matmul_reference_q8_x).
// Rows are split over the pool's threads. Allocates nothing.
void matmul(const Matrix& w, const float* x, int64_t T, float* y, ThreadPool& pool);

// The rows [r0, r1) of matmul()'s y on the calling thread, with the same kernel: for ops that
// split rows over the pool themselves and fuse their own work onto each row range (gate/up and
// GELU, the head and its softcap). Rows are computed independently: any split gives matmul()'s
// bits for T = 1, and for batched rows the same sums up to the order of the final horizontal adds.
void matmul_rows(const Matrix& w, const float* x, int64_t T, float* y, int64_t r0, int64_t r1);

// One of several matmuls run together: y [T, w.rows] = x [T, w.cols] · wᵀ.
struct MatmulJob {
  const Matrix* w;
  const float* x;
  float* y;
};

// Every job's rows, concatenated, split over the pool in one parallel call: small matrices that
// read the same input (q/k/v) cost one fork/join and one pass instead of one each.
void matmul_multi(std::span<const MatmulJob> jobs, int64_t T, ThreadPool& pool);

// Same contract, plain loops over dequantized rows with double accumulation: what the fast
// paths are tested against.
void matmul_reference(const Matrix& w, const float* x, int64_t T, float* y);

// For Q8_0/Q4_0 weights, the contract of the integer kernels (GGML's vec_dot): each token row of
// x is quantized with quantize_row_q8_0 (model/quant.h), each block's dot product is an exact
// integer, and y sums dot · d_w · d_x (both scales as fp16 -> f32) in double.
void matmul_reference_q8_x(const Matrix& w, const float* x, int64_t T, float* y);

// The path matmul() uses on this CPU: "avx512vnni", "avx512", "avx2" or "generic".
const char* matmul_isa();

// Which kernel matmul() runs. kFastest (the default): the fastest, which may quantize
// activations. kF32: Q8_0/Q4_0 weights meet f32 activations (matmul_reference's contract) even
// where an integer kernel exists, the semantics the GPU's f32 products compute. kInt8: they meet
// x quantized to Q8_0 (matmul_reference_q8_x's contract) on every CPU, the portable kernel where
// there is no integer one, the semantics of the GPU's integer-dot products. kF16: as kF32, but
// products of kF16MinTokens or more tokens take their activations and weights rounded to f16, as
// the GPU's cooperative-matrix prefill does (tests size its logits bound by it; slow, a reference).
enum class MatmulActivations { kFastest, kF32, kInt8, kF16 };
inline constexpr int64_t kF16MinTokens = 16;
void set_matmul_activations(MatmulActivations mode);

}  // namespace infer
