// Streaming-read bandwidth: each thread sums its contiguous slice with independent accumulators
// (so the loop is bound by loads, not by one add chain); the sums are kept so nothing is elided.
// The widest vector loads the CPU has and a software prefetch 4 KB ahead, as the matmul kernels
// use: without them this VM's read rate is ~25% below what decode itself reaches.
#include "cli/mem_bandwidth.h"

#include <immintrin.h>
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

#if defined(__x86_64__)
constexpr int64_t kPrefetchAhead = 512;  // u64 elements: 4 KB

__attribute__((target("avx512f"))) uint64_t sum_slice_avx512(const uint64_t* p, int64_t n) {
  __m512i a = _mm512_set1_epi64(0), b = a, c = a, d = a;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 32; k += 8) {
      _mm_prefetch(reinterpret_cast<const char*>(p + i + kPrefetchAhead + k), _MM_HINT_T0);
    }
    a = _mm512_add_epi64(a, _mm512_loadu_si512(p + i));
    b = _mm512_add_epi64(b, _mm512_loadu_si512(p + i + 8));
    c = _mm512_add_epi64(c, _mm512_loadu_si512(p + i + 16));
    d = _mm512_add_epi64(d, _mm512_loadu_si512(p + i + 24));
  }
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a, b), _mm512_add_epi64(c, d)));
  uint64_t total = 0;
  for (uint64_t v : lanes) total += v;
  return total + sum_slice(p + i, n - i);
}

__attribute__((target("avx2"))) uint64_t sum_slice_avx2(const uint64_t* p, int64_t n) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int k = 0; k < 16; k += 8) {
      _mm_prefetch(reinterpret_cast<const char*>(p + i + kPrefetchAhead + k), _MM_HINT_T0);
    }
    a = _mm256_add_epi64(a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_add_epi64(b, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
    c = _mm256_add_epi64(c, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    d = _mm256_add_epi64(d, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes),
                     _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d)));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3] + sum_slice(p + i, n - i);
}
#endif

using SumFn = uint64_t (*)(const uint64_t*, int64_t);

SumFn best_sum_slice() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) return sum_slice_avx512;
  if (__builtin_cpu_supports("avx2")) return sum_slice_avx2;
#endif
  return sum_slice;
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
  const SumFn sum = best_sum_slice();
  for (int p = 0; p < passes; ++p) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(
        n,
        [&](int64_t b, int64_t e) {
          sink.fetch_add(sum(buf.get() + b, e - b), std::memory_order_relaxed);
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
