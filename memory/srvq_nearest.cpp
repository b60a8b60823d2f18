// The reference nearest-centroid search and the choice of the fast path (srvq_nearest.h).
#include "memory/srvq_nearest.h"

namespace infer::memory {

int nearest_centroid(const float* x, const float* cents_t, const float* norms, int k, int d) {
  float score[256];
  for (int j = 0; j < k; ++j) score[j] = norms[j];
  for (int t = 0; t < d; ++t) {
    const float xt = -2.0f * x[t];
    const float* c = cents_t + static_cast<size_t>(t) * k;
    for (int j = 0; j < k; ++j) score[j] += xt * c[j];
  }
  int best = 0;
  for (int j = 1; j < k; ++j)
    if (score[j] < score[best]) best = j;
  return best;
}

NearestCentroidFn fastest_nearest_centroid(int k) {
#if defined(INFER_SRVQ_AVX2)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2 && k % 32 == 0) return nearest_centroid_avx2;
#endif
  (void)k;
  return nearest_centroid;
}

}  // namespace infer::memory
