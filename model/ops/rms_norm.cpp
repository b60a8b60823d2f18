// RMSNorm reference: plain loops; the mean of squares is accumulated in double so the result
// does not depend on the row length's rounding (the fp32 oracle agrees to ~1e-7 relative).
#include "model/ops/rms_norm.h"

#include <cmath>

namespace infer {

void rms_norm(const float* x, const float* w, int64_t rows, int64_t n, float eps, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = out + r * n;
    double sum_sq = 0.0;
    for (int64_t i = 0; i < n; ++i) sum_sq += double(xr[i]) * double(xr[i]);
    const float mean = float(sum_sq / double(n));
    const float inv = 1.0f / std::sqrt(mean + eps);
    if (w != nullptr) {
      for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * inv * w[i];
    } else {
      for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * inv;
    }
  }
}

}  // namespace infer
