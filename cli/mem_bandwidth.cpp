// Streaming-read bandwidth: each thread sums its contiguous slice with independent accumulators
// (so the loop is bound by loads, not by one add chain); the sums are kept so nothing is elided.
#include "cli/mem_bandwidth.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "model/thread_pool.h"

namespace infer::cli {
namespace {

size_t buffer_size() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  size_t bytes = size_t(1) << 30;
  if (pages > 0 && page > 0) bytes = std::min(bytes, size_t(pages) * size_t(page) / 8);
  return std::max(bytes, size_t(64) << 20);
}

uint64_t sum_slice(const uint64_t* p, int64_t n) {
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    s0 += p[i];
    s1 += p[i + 1];
    s2 += p[i + 2];
    s3 += p[i + 3];
    s4 += p[i + 4];
    s5 += p[i + 5];
    s6 += p[i + 6];
    s7 += p[i + 7];
  }
  for (; i < n; ++i) s0 += p[i];
  return s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7;
}

}  // namespace

Bandwidth measure_read_bandwidth(ThreadPool& pool, int passes) {
  Bandwidth out;
  out.buffer_bytes = buffer_size();
  const int64_t n = int64_t(out.buffer_bytes / sizeof(uint64_t));
  std::unique_ptr<uint64_t[]> buf(new uint64_t[size_t(n)]);
  constexpr int64_t kAlign = 4096 / sizeof(uint64_t);  // whole pages per thread
  // First touch from the threads that will read, so pages are faulted in (and NUMA-local).
  pool.parallel_for(
      n,
      [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) buf[size_t(i)] = uint64_t(i) * 0x9E3779B97F4A7C15ULL;
      },
      kAlign);

  std::atomic<uint64_t> sink{0};
  for (int p = 0; p < passes; ++p) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(
        n,
        [&](int64_t b, int64_t e) {
          sink.fetch_add(sum_slice(buf.get() + b, e - b), std::memory_order_relaxed);
        },
        kAlign);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.passes_gb_per_s.push_back(double(out.buffer_bytes) / s / 1e9);
  }
  std::vector<double> sorted = out.passes_gb_per_s;
  std::sort(sorted.begin(), sorted.end());
  out.best_gb_per_s = sorted.back();
  out.median_gb_per_s = sorted[sorted.size() / 2];
  return out;
}

}  // namespace infer::cli
