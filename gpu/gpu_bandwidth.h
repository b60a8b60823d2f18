// The device's memory bandwidth as the bench measures it (DESIGN.md §10: figures against the
// bandwidth limit measured on the same machine): a compute shader streaming through a large
// buffer (shaders/read_bandwidth.comp), decode's own access pattern and the bound it is
// measured against; and a buffer-to-buffer copy, timed with fences, kept as a second figure
// (on an H200 vkCmdCopyBuffer reaches ~0.8 TB/s of traffic, a read ~4 TB/s).
#pragma once

#include <cstddef>
#include <vector>

#include "base/result.h"

namespace infer::gpu {

class Recorder;
class VulkanContext;

// Seconds (submit to fence) of `passes` replays of the ended reusable recording `rec`, after one
// untimed warm-up replay.
Result<std::vector<double>> replay_seconds(Recorder& rec, int passes);
// The median of replay_seconds(rec, passes).
Result<double> replay_median_seconds(Recorder& rec, int passes);

struct CopyBandwidth {
  // Traffic per second: (bytes read + bytes written) / s = 2 × copy size / time, GB = 1e9 bytes.
  // A copy reads and writes equally, so this is the rate at which the memory moves bytes; decode
  // mostly reads, and its bound is taken as this figure.
  double best_gb_per_s = 0.0;
  double median_gb_per_s = 0.0;
  size_t copy_bytes = 0;  // bytes copied per pass (each pass reads and writes this many)
  std::vector<double> passes_gb_per_s;
};

struct ReadBandwidth {
  double best_gb_per_s = 0.0;  // bytes read / s, GB = 1e9 bytes
  double median_gb_per_s = 0.0;
  size_t buffer_bytes = 0;  // bytes read per sweep
  int sweeps_per_pass = 0;  // sweeps recorded back to back in one timed submit
  std::vector<double> passes_gb_per_s;
};

// Reads a buffer of `bytes` (min(bytes, a quarter of the largest device-local heap); >= 1 GiB
// for a figure past every cache) with a compute shader, `sweeps` whole-buffer sweeps per
// submit so the submit-to-fence overhead is spread over them; `passes` submits timed from
// submit to fence after one warm-up.
Result<ReadBandwidth> measure_device_read_bandwidth(const VulkanContext& ctx,
                                                    size_t bytes = size_t(1) << 30,
                                                    int passes = 5, int sweeps = 8);

// Copies a buffer of `bytes` (min(bytes, a quarter of the largest device-local heap)) into
// another `passes` times, each a submit timed from submit to fence, after one warm-up pass.
Result<CopyBandwidth> measure_copy_bandwidth(const VulkanContext& ctx,
                                             size_t bytes = size_t(1) << 30, int passes = 7);

}  // namespace infer::gpu
