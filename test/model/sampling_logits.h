// Logits the sampler tests share: a deterministic ramp of values in [-4, 4).
#pragma once

#include <cstdint>
#include <vector>

namespace infer::test {

inline std::vector<float> ramp_logits(int64_t V, uint64_t seed) {
  std::vector<float> l(static_cast<size_t>(V));
  uint64_t s = seed;
  for (auto& v : l) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    v = float(double(s >> 11) * 0x1.0p-53 * 8.0 - 4.0);
  }
  return l;
}

}  // namespace infer::test
