// ThreadPool: every index once, aligned chunks, chunk 0 on the caller, and no lost wake-ups when
// jobs come back to back (workers spinning) or after a pause (workers asleep).
#include "model/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

namespace infer {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 3, 7, 16, 100, 1001}) {
      for (int64_t align : {1, 4, 16}) {
        SCOPED_TRACE(testing::Message() << threads << " threads, n " << n << ", align " << align);
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.parallel_for(
            n,
            [&](int64_t b, int64_t e) {
              EXPECT_LT(b, e);
              EXPECT_EQ(b % align, 0);
              for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
            },
            align);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "index " << i;
      }
    }
  }
}

TEST(ThreadPool, CallerRunsChunkZero) {
  ThreadPool pool(2);
  std::thread::id first;
  pool.parallel_for(100, [&](int64_t b, int64_t) {
    if (b == 0) first = std::this_thread::get_id();
  });
  EXPECT_EQ(first, std::this_thread::get_id());
}

// Chunk 0 (the caller's) waits until chunk 1 has started: only a worker can run it then, so the
// job completing shows the work is split. (The caller may take chunks no worker has claimed, so
// which thread runs chunk 1 is otherwise not fixed.)
TEST(ThreadPool, SplitsWorkAcrossThreads) {
  ThreadPool pool(2);
  std::atomic<bool> second_started{false};
  std::thread::id ids[2];
  bool waited_out = false;
  pool.parallel_for(64, [&](int64_t b, int64_t) {
    ids[b == 0 ? 0 : 1] = std::this_thread::get_id();
    if (b != 0) {
      second_started.store(true);
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!second_started.load()) {
      if (std::chrono::steady_clock::now() > deadline) {
        waited_out = true;
        return;
      }
      std::this_thread::yield();
    }
  });
  EXPECT_FALSE(waited_out) << "no worker ran chunk 1";
  EXPECT_NE(ids[0], ids[1]);
}

TEST(ThreadPool, SizeOneRunsInlineAsOneChunk) {
  ThreadPool pool(1);
  EXPECT_EQ(pool.size(), 1);
  int calls = 0;
  const std::thread::id caller = std::this_thread::get_id();
  pool.parallel_for(10, [&](int64_t b, int64_t e) {
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 10);
    EXPECT_EQ(std::this_thread::get_id(), caller);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

TEST(ThreadPool, EmptyRangeCallsNothing) {
  ThreadPool pool(2);
  bool called = false;
  pool.parallel_for(0, [&](int64_t, int64_t) { called = true; });
  EXPECT_FALSE(called);
}

TEST(ThreadPool, ManyBackToBackJobsAllComplete) {
  // Decode's pattern: thousands of tiny jobs microseconds apart, workers spinning between them.
  ThreadPool pool(2);
  int64_t total = 0;
  std::vector<int64_t> part(2);
  for (int i = 0; i < 5000; ++i) {
    pool.parallel_for(2, [&](int64_t b, int64_t e) { part[size_t(b)] = e - b; });
    total += part[0] + part[1];
    part[0] = part[1] = 0;
  }
  EXPECT_EQ(total, 10000);
}

TEST(ThreadPool, WakesSleepingWorkers) {
  // Past the spin window the workers sleep on the condition variable; each job must still run.
  ThreadPool pool(3);
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    std::atomic<int> sum{0};
    pool.parallel_for(3, [&](int64_t b, int64_t e) { sum.fetch_add(int(e - b)); });
    EXPECT_EQ(sum.load(), 3);
  }
}

TEST(ThreadPool, DestroysWithSleepingWorkers) {
  // Workers asleep on the condition variable must wake and join when the pool is destroyed; a
  // destructor that missed the wake-up would hang, so it runs on its own thread with a deadline.
  auto pool = std::make_unique<ThreadPool>(4);
  std::atomic<int64_t> covered{0};
  pool->parallel_for(8, [&](int64_t b, int64_t e) { covered.fetch_add(e - b); });
  EXPECT_EQ(covered.load(), 8);
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  std::atomic<bool> joined{false};
  std::thread destroyer([&] {
    pool.reset();
    joined.store(true);
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!joined.load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!joined.load()) {
    destroyer.detach();  // still blocked in the destructor: report, do not terminate
    FAIL() << "~ThreadPool did not join its sleeping workers within 10 s";
  }
  destroyer.join();
  EXPECT_EQ(pool, nullptr);
}

}  // namespace
}  // namespace infer
