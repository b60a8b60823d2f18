// ThreadPool: workers spin briefly between jobs, then sleep on a condition variable. Chunks are
// claimed through one atomic word, so the caller takes over the chunks of a worker that has not
// woken yet: on a machine where another process holds that worker's core, waiting for it cost a
// scheduler slice (~20 ms) per token (docs/PERFORMANCE.md, "Threads").
#include "model/thread_pool.h"

#include <chrono>

#include "base/check.h"

namespace infer {

namespace {

// How long an idle worker spins before it sleeps: longer than the gaps between the parallel ops
// of one decode step, short enough not to burn a core between user turns.
constexpr auto kSpin = std::chrono::microseconds(500);

constexpr int kIndexBits = 13;  // chunks and the next chunk: up to 4096 threads
constexpr uint64_t kIndexMask = (uint64_t(1) << kIndexBits) - 1;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  INFER_CHECK(n_threads_ <= int(kIndexMask), "%d threads", n_threads_);
  workers_.reserve(size_t(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this] { worker(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunk(int64_t index) {
  const int64_t begin = index * chunk_;
  const int64_t end = begin + chunk_ < n_ ? begin + chunk_ : n_;
  if (begin < end) thunk_(ctx_, begin, end);
  pending_.fetch_sub(1, std::memory_order_acq_rel);
}

void ThreadPool::run_claimed() {
  uint64_t word = claim_.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t next = word & kIndexMask, chunks = (word >> kIndexBits) & kIndexMask;
    if (next >= chunks) return;
    // Success publishes nothing but acquires the job that the caller released with the word.
    if (claim_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
      run_chunk(int64_t(next));
      word = claim_.load(std::memory_order_acquire);
    }
  }
}

void ThreadPool::run(int64_t n, int64_t align, Thunk thunk, void* ctx) {
  if (n <= 0) return;
  if (align < 1) align = 1;
  int64_t chunk = (n + n_threads_ - 1) / n_threads_;
  chunk = (chunk + align - 1) / align * align;
  if (n_threads_ == 1 || chunk >= n) {  // one chunk: no hand-off
    thunk(ctx, 0, n);
    return;
  }
  thunk_ = thunk;
  ctx_ = ctx;
  n_ = n;
  chunk_ = chunk;
  const uint64_t chunks = uint64_t((n + chunk - 1) / chunk);
  pending_.store(int(chunks), std::memory_order_relaxed);
  const uint64_t job = (claim_.load(std::memory_order_relaxed) >> (2 * kIndexBits)) + 1;
  // Chunk 0 is the caller's (claimed in the word itself); the rest go to whoever comes first.
  claim_.store(job << (2 * kIndexBits) | chunks << kIndexBits | 1, std::memory_order_release);
  bool wake;
  {
    // Under the lock so that a worker deciding to sleep either sees the new generation or is
    // counted in sleepers_ (no lost wake-up); uncontended, this costs no system call.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
    wake = sleepers_ > 0;
  }
  if (wake) cv_.notify_all();
  run_chunk(0);
  run_claimed();
  // Only chunks that workers claimed are left; they are balanced, so the wait is short. Yield
  // after a while in case a worker shares this core with us, so that it can run at all.
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < 4096) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::worker() {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    if (gen == seen) {
      const auto deadline = std::chrono::steady_clock::now() + kSpin;
      int spins = 0;
      while ((gen = generation_.load(std::memory_order_acquire)) == seen) {
        cpu_relax();
        if (++spins % 64 == 0 && std::chrono::steady_clock::now() > deadline) break;
      }
      if (gen == seen) {
        std::unique_lock<std::mutex> lock(mu_);
        ++sleepers_;
        cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        --sleepers_;
        gen = generation_.load(std::memory_order_acquire);
      }
    }
    seen = gen;
    if (stop_.load(std::memory_order_relaxed)) return;
    run_claimed();
  }
}

}  // namespace infer
