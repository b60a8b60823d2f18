// Gated GELU and the logit soft-cap over arrays: one vectorised exp per element (the attention
// kernels' exp, chosen by CPUID), in blocks that fit on the stack.
#include "model/ops/gelu.h"

#include <algorithm>

#include "model/ops/attention_kernels.h"

namespace infer {
namespace {

constexpr int64_t kBlock = 256;

ExpFn best_exp() {
  static const ExpFn exp = attention_kernels().front().exp;
  return exp;
}

}  // namespace

void gelu_mul(const float* gate, const float* up, int64_t n, float* out) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;  // √(2/π)
  const ExpFn exp = best_exp();
  float e[kBlock];
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    for (int64_t i = 0; i < m; ++i) {
      const float z = gate[b + i];
      e[i] = -2.0f * kSqrt2OverPi * (z + 0.044715f * z * z * z);  // -2u
    }
    exp(e, e, m);
    // z · sigmoid(2u) = z / (1 + e^(-2u)): e = +inf gives -0 for very negative z, as gelu does.
    for (int64_t i = 0; i < m; ++i) out[b + i] = gate[b + i] / (1.0f + e[i]) * up[b + i];
  }
}

void softcap(float* y, int64_t n, float cap) {
  const ExpFn exp = best_exp();
  const float inv = 1.0f / cap;
  float e[kBlock];
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    for (int64_t i = 0; i < m; ++i) e[i] = -2.0f * std::abs(y[b + i] * inv);
    exp(e, e, m);
    // tanh|a| = (1 - e^(-2|a|)) / (1 + e^(-2|a|)), sign restored: no overflow for any a.
    for (int64_t i = 0; i < m; ++i) {
      y[b + i] = std::copysign((1.0f - e[i]) / (1.0f + e[i]), y[b + i]) * cap;
    }
  }
}

}  // namespace infer
