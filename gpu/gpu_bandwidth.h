// The device's memory bandwidth as the bench measures it (DESIGN.md §10: figures against the
// bandwidth limit measured on the same machine): a large buffer-to-buffer copy on the device,
// timed with fences.
#pragma once

#include <cstddef>
#include <vector>

#include "base/result.h"

namespace infer::gpu {

class VulkanContext;

struct CopyBandwidth {
  // Traffic per second: (bytes read + bytes written) / s = 2 × copy size / time, GB = 1e9 bytes.
  // A copy reads and writes equally, so this is the rate at which the memory moves bytes; decode
  // mostly reads, and its bound is taken as this figure.
  double best_gb_per_s = 0.0;
  double median_gb_per_s = 0.0;
  size_t copy_bytes = 0;  // bytes copied per pass (each pass reads and writes this many)
  std::vector<double> passes_gb_per_s;
};

// Copies a buffer of `bytes` (min(bytes, a quarter of the largest device-local heap)) into
// another `passes` times, each a submit timed from submit to fence, after one warm-up pass.
Result<CopyBandwidth> measure_copy_bandwidth(const VulkanContext& ctx,
                                             size_t bytes = size_t(1) << 30, int passes = 7);

}  // namespace infer::gpu
