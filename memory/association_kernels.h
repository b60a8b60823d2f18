// The arithmetic association keys and scores run on (association.h): dots, the best dot over
// a query's and a key's parts, and products with the fixed projections stored transposed. Each
// has a portable path and a wider one chosen once by CPUID that gives the same bits: every sum
// is taken in the same order, and a multiply and an add are never fused, so a store ranks its
// episodes alike everywhere and a query's key does not depend on the CPU.
#pragma once

#include <cstddef>
#include <vector>

#include "model/thread_pool.h"

namespace infer::memory {

// Σ_i a[i] b[i]: two 4-lane partial sums over steps of 8, the lanes added in a fixed order,
// then the tail.
float dot_base(const float* a, const float* b, size_t n);

// max(0, the largest dot of query parts [0, parts) with key parts [0, subs)), parts D long.
float best_dot(const float* query, const float* key, size_t parts, size_t subs, size_t D);

// out [rows] = m x with mt = m transposed [cols, rows]: out[r] = Σ_c mt[c, r] x[c], each sum
// over c in order from 0 (a column with x[c] == 0 skipped: adding its ±0 products could not
// change a sum that starts at +0, mt being finite).
void matvec_t(const float* mt, size_t rows, size_t cols, const float* x, float* out);
void matvec_t_base(const float* mt, size_t rows, size_t cols, const float* x, float* out);

// matvec_t for T vectors at once: x [T, x_stride] -> out [T, out_stride], every sum
// matvec_t's. The wide path reads each column of mt once for four vectors: a query's tokens
// share the projections (1.8 MB for E2B's first two), which one vector at a time streamed
// through the cache for every token.
// With a pool, blocks of 16 rows go to its threads: the same sums, so the same bits.
void matmul_t(const float* mt, size_t rows, size_t cols, const float* x, size_t T,
              size_t x_stride, float* out, size_t out_stride, ThreadPool* pool = nullptr);

// The indices of the k largest of x [m] (in no order; 0 < k <= m): the set std::nth_element
// over all of [0, m) with `x[a] > x[b]` leaves first, ties at the cut included (out is scratch
// too). x holds a token's lifted units, near N(0, 1) each.
void largest_units(const float* x, size_t m, size_t k, std::vector<int>& out);

}  // namespace infer::memory
