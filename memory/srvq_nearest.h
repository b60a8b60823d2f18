// SrvqCodec's encoding loop (memory/srvq.cpp): the centroid nearest a sub-vector, argmin over j
// of |c_j|^2 - 2 x.c_j, with the centroids stored transposed so that the loop over centroids is
// contiguous. The reference is plain loops; the AVX2 path keeps every centroid's score in
// registers across the sub-vector. Both compute each score with the same operations in the same
// order (a multiply, then an add, never fused), so they pick the same centroid, bit for bit.
#pragma once

#include <cstddef>

namespace infer::memory {

// x [d]; cents_t [d, k] (cents_t[t * k + j] is element t of centroid j); norms [k] (|c_j|^2).
// Returns the first j of the least score. k <= 256.
int nearest_centroid(const float* x, const float* cents_t, const float* norms, int k, int d);
// The same where k % 32 == 0, on a CPU with AVX2 (srvq_nearest_avx2.cpp).
int nearest_centroid_avx2(const float* x, const float* cents_t, const float* norms, int k, int d);

using NearestCentroidFn = int (*)(const float*, const float*, const float*, int, int);
// The fastest of the two this CPU runs for k centroids (chosen by CPUID).
NearestCentroidFn fastest_nearest_centroid(int k);

}  // namespace infer::memory
