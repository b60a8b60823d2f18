// The machine's memory read bandwidth, measured the way decode uses memory: one streaming read of
// a buffer far larger than the caches, split over all threads.
#pragma once

#include <cstddef>
#include <vector>

namespace infer {
class ThreadPool;
}

namespace infer::cli {

struct Bandwidth {
  double best_gb_per_s = 0.0;  // GB = 1e9 bytes
  double median_gb_per_s = 0.0;
  size_t buffer_bytes = 0;
  std::vector<double> passes_gb_per_s;
};

// A buffer of min(1 GiB, physical memory / 8) (at least 64 MiB), touched once, then `passes`
// timed reads on all of `pool`'s threads.
Bandwidth measure_read_bandwidth(ThreadPool& pool, int passes = 7);

}  // namespace infer::cli
