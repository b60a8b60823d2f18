// splitmix64: the same stream on every platform and standard library (std's distributions are
// not portable), so codebooks and association projections are the same wherever they are made.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace infer::memory {

struct SplitMix64 {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
  float gaussian() {  // Box-Muller, one value per call
    const double u1 = std::max(uniform(), 1e-300), u2 = uniform();
    return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
};

}  // namespace infer::memory
