// Gated GELU reference: a plain loop over gelu_tanh.
#include "model/ops/gelu.h"

namespace infer {

void gelu_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_tanh(gate[i]) * up[i];
}

}  // namespace infer
