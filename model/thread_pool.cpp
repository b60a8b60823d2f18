// ThreadPool: workers spin briefly between jobs, then sleep on a condition variable.
#include "model/thread_pool.h"

#include <chrono>

#include "base/check.h"

namespace infer {

namespace {

// How long an idle worker spins before it sleeps: longer than the gaps between the parallel ops
// of one decode step, short enough not to burn a core between user turns.
constexpr auto kSpin = std::chrono::microseconds(500);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  workers_.reserve(size_t(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
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

void ThreadPool::run_chunk(int index) {
  const int64_t begin = int64_t(index) * chunk_;
  const int64_t end = begin + chunk_ < n_ ? begin + chunk_ : n_;
  if (begin < end) thunk_(ctx_, begin, end);
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
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
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
  // Chunks are balanced, so the wait is short; yield after a while in case a worker shares this
  // core with us (an oversubscribed machine), so that it can run at all.
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < 4096) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::worker(int index) {
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
    run_chunk(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace infer
