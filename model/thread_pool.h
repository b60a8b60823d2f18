// A fixed pool of worker threads for data-parallel loops. parallel_for takes any callable by
// reference and never allocates, so decode can use it in its hot loop.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace infer {

class ThreadPool {
 public:
  // n_threads counts the calling thread: ThreadPool(1) runs everything inline.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls f(begin, end) over [0, n) split into contiguous chunks, one per thread (chunk sizes
  // rounded up to `align`; empty chunks are not called), and waits for all of them. The calling
  // thread runs chunk 0, then any chunk no worker has claimed yet: a worker that is slow to wake
  // (its core busy with another process) costs nothing unless it already started a chunk. Not
  // reentrant: f must not call parallel_for on the same pool.
  template <class F>
  void parallel_for(int64_t n, F&& f, int64_t align = 1) {
    using Fn = std::remove_reference_t<F>;
    auto thunk = [](void* ctx, int64_t b, int64_t e) { (*static_cast<Fn*>(ctx))(b, e); };
    run(n, align, thunk, const_cast<void*>(static_cast<const void*>(&f)));
  }

 private:
  using Thunk = void (*)(void*, int64_t, int64_t);
  void run(int64_t n, int64_t align, Thunk thunk, void* ctx);
  void worker();
  void run_chunk(int64_t index);
  // Claims and runs chunks of the current job until none is left (any thread).
  void run_claimed();

  int n_threads_;
  std::vector<std::thread> workers_;
  // Workers spin on generation_ for a while after each job (decode calls parallel_for ~10 times a
  // layer, microseconds apart), then sleep on cv_; run() notifies only when someone sleeps.
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};
  int sleepers_ = 0;               // guarded by mu_
  std::atomic<bool> stop_{false};  // published by generation_ like a job
  std::atomic<int> pending_{0};    // chunks of the current job not finished yet
  // The next chunk to claim, in one word with its job so that a claim is one compare-and-swap:
  // job number << 26 | chunks << 13 | next (at most 4096 threads, so 13 bits each). A thread
  // reads the job below only after claiming one of its chunks, and the caller does not start
  // the next job before every claimed chunk is done, so the job stays put while it is read.
  std::atomic<uint64_t> claim_{0};
  // The current job, published by the release store to claim_.
  Thunk thunk_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 0;
};

}  // namespace infer
