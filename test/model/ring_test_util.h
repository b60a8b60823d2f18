// Helpers the CPU and GPU ring tests share: a ring configuration, deterministic token ids.
#pragma once

#include <cstdint>
#include <vector>

#include "model/kv_ring.h"

namespace infer::test {

inline RingConfig ring(int64_t A, int64_t W, int64_t R, EvictPolicy p = EvictPolicy::kFifo) {
  RingConfig c;
  c.anchors = A;
  c.window = W;
  c.recall = R;
  c.evict = p;
  return c;
}

// Deterministic ids in [1, V) (the fixtures' vocabulary is 512).
inline std::vector<int32_t> pseudo_ids(int64_t n, int64_t V, uint32_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint32_t s = seed;
  for (auto& id : ids) {
    s = s * 1664525u + 1013904223u;
    id = int32_t(1 + (s >> 8) % uint32_t(V - 1));
  }
  return ids;
}

}  // namespace infer::test
