// Softmax reference: subtract the max, exponentiate, normalise; the sum is kept in double.
#include "model/ops/softmax.h"

#include <cmath>

namespace infer {

void softmax(float* z, int64_t n) {
  float mx = z[0];
  for (int64_t i = 1; i < n; ++i) mx = z[i] > mx ? z[i] : mx;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    z[i] = std::exp(z[i] - mx);
    sum += z[i];
  }
  const float inv = float(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) z[i] *= inv;
}

}  // namespace infer
