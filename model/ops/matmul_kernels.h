// The per-ISA matmul kernels behind matmul() (model/ops/matmul.h), named so tests can run each
// one this CPU supports. Each computes the rows [r0, r1) of y for all T tokens, single-threaded.
#pragma once

#include <cstdint>
#include <span>

#include "model/matrix.h"

namespace infer {

class ThreadPool;

// x: [T, w.cols] f32, y: [T, w.rows] f32; writes y[t][r] for r in [r0, r1).
using MatmulRowsFn = void (*)(const Matrix& w, const float* x, int64_t T, float* y, int64_t r0,
                              int64_t r1);

struct MatmulKernel {
  const char* name;
  MatmulRowsFn rows;
  // Q8_0/Q4_0 weights meet x quantized to Q8_0 (integer dots, matmul_reference_q8_x's contract)
  // rather than f32 x (matmul_reference's).
  bool quantizes_x = false;
};

// Row blocks handed to threads are multiples of this (whole 64-byte lines of y per thread).
constexpr int64_t kMatmulRowAlign = 16;

void matmul_rows_generic(const Matrix& w, const float* x, int64_t T, float* y, int64_t r0,
                         int64_t r1);
void matmul_rows_avx2(const Matrix& w, const float* x, int64_t T, float* y, int64_t r0, int64_t r1);
void matmul_rows_avx512(const Matrix& w, const float* x, int64_t T, float* y, int64_t r0,
                        int64_t r1);
// Q8_0/Q4_0 with Q8_0 activations and VPDPBUSD (matmul_avx512_vnni.cpp); other formats as
// matmul_rows_avx512.
void matmul_rows_avx512_vnni(const Matrix& w, const float* x, int64_t T, float* y, int64_t r0,
                             int64_t r1);
// Q8_0/Q4_0 with Q8_0 activations in portable C++ (matmul_reference_q8_x's contract, f32 sums
// block by block): the integer contract on CPUs without an integer kernel, for comparisons with
// the GPU's integer-dot forward (set_matmul_activations(kInt8)); other formats as
// matmul_rows_generic.
void matmul_rows_generic_q8_x(const Matrix& w, const float* x, int64_t T, float* y, int64_t r0,
                              int64_t r1);

// The kernels this CPU can run, best first; matmul() uses the first. The portable integer one
// comes last, after the portable f32 one: it is never the fastest.
std::span<const MatmulKernel> matmul_kernels();

// matmul() with a given kernel, rows split over the pool.
void matmul_with(const MatmulKernel& k, const Matrix& w, const float* x, int64_t T, float* y,
                 ThreadPool& pool);

}  // namespace infer
