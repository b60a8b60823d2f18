// Tanh-approximate GELU (torch gelu(approximate="tanh"), GEMMA4_TEXT.md §4.8) and the gated
// product the MLP, the experts and the PLE gate use.
#pragma once

#include <cmath>
#include <cstdint>

namespace infer {

inline float gelu_tanh(float z) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;  // √(2/π)
  return 0.5f * z * (1.0f + std::tanh(kSqrt2OverPi * (z + 0.044715f * z * z * z)));
}

// gate, up: [n] f32 -> out: [n] f32, out[i] = gelu(gate[i]) · up[i]; out may alias gate or up.
// Computed as z · sigmoid(2u) (the same function as gelu_tanh: 1 + tanh(u) = 2 · sigmoid(2u))
// with the vectorised exp of the attention kernels: libm's tanhf was ~5-12% of decode/prefill.
void gelu_mul(const float* gate, const float* up, int64_t n, float* out);

// y[i] = tanh(y[i] / cap) · cap (the final logit soft-cap, §4.10), in place, with the same
// vectorised exp; absolute error below ~1e-6 · cap.
void softcap(float* y, int64_t n, float cap);

}  // namespace infer
