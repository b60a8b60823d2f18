// nearest_centroid on AVX2 (srvq_nearest.h), compiled with -mavx2 and without -mfma: a fused
// multiply-add rounds once where the reference rounds twice, which could turn a near tie the
// other way and change a code. 32 centroids at a time, their scores in four registers across
// the whole sub-vector (the reference reloads and stores every score for every element).
#include <immintrin.h>

#include "memory/srvq_nearest.h"

namespace infer::memory {

int nearest_centroid_avx2(const float* x, const float* cents_t, const float* norms, int k,
                          int d) {
  int best = 0;
  float best_score = 0;
  alignas(32) float score[32];
  for (int j0 = 0; j0 < k; j0 += 32) {
    __m256 s0 = _mm256_loadu_ps(norms + j0), s1 = _mm256_loadu_ps(norms + j0 + 8),
           s2 = _mm256_loadu_ps(norms + j0 + 16), s3 = _mm256_loadu_ps(norms + j0 + 24);
    for (int t = 0; t < d; ++t) {
      const __m256 xt = _mm256_set1_ps(-2.0f * x[t]);
      const float* c = cents_t + static_cast<size_t>(t) * k + j0;
      s0 = _mm256_add_ps(s0, _mm256_mul_ps(xt, _mm256_loadu_ps(c)));
      s1 = _mm256_add_ps(s1, _mm256_mul_ps(xt, _mm256_loadu_ps(c + 8)));
      s2 = _mm256_add_ps(s2, _mm256_mul_ps(xt, _mm256_loadu_ps(c + 16)));
      s3 = _mm256_add_ps(s3, _mm256_mul_ps(xt, _mm256_loadu_ps(c + 24)));
    }
    _mm256_store_ps(score, s0);
    _mm256_store_ps(score + 8, s1);
    _mm256_store_ps(score + 16, s2);
    _mm256_store_ps(score + 24, s3);
    for (int j = 0; j < 32; ++j) {
      if ((j0 == 0 && j == 0) || score[j] < best_score) {
        best_score = score[j];
        best = j0 + j;
      }
    }
  }
  return best;
}

}  // namespace infer::memory
