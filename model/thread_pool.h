// A fixed pool of worker threads for data-parallel loops. parallel_for takes any callable by
// reference and never allocates, so decode can use it in its hot loop.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
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
  // rounded to `align`), and waits for all of them.
  template <class F>
  void parallel_for(int64_t n, F&& f, int64_t align = 1) {
    auto thunk = [](void* ctx, int64_t b, int64_t e) { (*static_cast<F*>(ctx))(b, e); };
    run(n, align, thunk, &f);
  }

 private:
  using Thunk = void (*)(void*, int64_t, int64_t);
  void run(int64_t n, int64_t align, Thunk thunk, void* ctx);
  void worker(int index);
  void run_chunk(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::atomic<int> pending_{0};
  // The current job.
  Thunk thunk_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  int64_t align_ = 1;
};

}  // namespace infer
