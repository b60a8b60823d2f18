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
// Weights are dequantized on the fly; activations stay f32 and sums are f32. Rows are split over
// the pool's threads. Allocates nothing.
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

// The path matmul() uses on this CPU: "avx512", "avx2" or "generic".
const char* matmul_isa();

}  // namespace infer
