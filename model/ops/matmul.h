// y = x · wᵀ for every weight format (model/matrix.h): the plain reference and the fast path,
// which picks AVX-512, AVX2 or portable C++ once at startup by CPUID.
#pragma once

#include <cstdint>

#include "model/matrix.h"

namespace infer {

class ThreadPool;

// x: [T, cols] f32 row-major, w: [rows, cols] (any format) -> y: [T, rows] f32:
//   y[t][r] = sum_c w[r][c] · x[t][c]
// Weights are dequantized on the fly; activations stay f32 and sums are f32. Rows are split over
// the pool's threads. Allocates nothing.
void matmul(const Matrix& w, const float* x, int64_t T, float* y, ThreadPool& pool);

// Same contract, plain loops over dequantized rows with double accumulation: what the fast
// paths are tested against.
void matmul_reference(const Matrix& w, const float* x, int64_t T, float* y);

// The path matmul() uses on this CPU: "avx512", "avx2" or "generic".
const char* matmul_isa();

}  // namespace infer
