// Decode and prefill allocate nothing once CpuForward is built (cpu_forward.h): global operator
// new/delete are replaced in this test binary by counting versions, which count only while
// g_counting is set, so the other tests are unaffected.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "model/cpu_forward.h"
#include "model/model.h"
#include "model/quiescence.h"
#include "model/thread_pool.h"
#include "test/model/golden_fixture.h"
#include "test/test_paths.h"

// The replacements below pair malloc with free by design; GCC cannot see that through inlining.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {

std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};

void* counted_alloc(std::size_t n, std::size_t align) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  if (n == 0) n = 1;
  void* p = align <= alignof(std::max_align_t)
                ? std::malloc(n)
                : std::aligned_alloc(align, (n + align - 1) / align * align);
  return p;
}

}  // namespace

void* operator new(std::size_t n) {
  void* p = counted_alloc(n, 0);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new[](std::size_t n) {
  void* p = counted_alloc(n, 0);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new(std::size_t n, std::align_val_t a) {
  void* p = counted_alloc(n, std::size_t(a));
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new[](std::size_t n, std::align_val_t a) {
  void* p = counted_alloc(n, std::size_t(a));
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n, 0); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n, 0); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_alloc(n, std::size_t(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_alloc(n, std::size_t(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

namespace infer {
namespace {

// Allocations made by `f` on any thread.
template <class F>
int64_t count_allocations(F&& f) {
  g_allocations.store(0);
  g_counting.store(true);
  f();
  g_counting.store(false);
  return g_allocations.load();
}

class DecodeAlloc : public ::testing::TestWithParam<const char*> {};

TEST_P(DecodeAlloc, SixtyFourDecodeStepsAndAPrefillAllocateNothing) {
  ThreadPool pool(2);
  const auto dir = test::repo_fixtures() / "gemma4-text" / GetParam();
  const test::FixtureGolden golden = test::read_fixture_golden(dir);
  auto m = Model::load(dir, LoadOptions{Quant::kAsStored, EmbedScale::kF32}, pool);
  ASSERT_TRUE(m.ok()) << m.error().message;
  CpuForward fwd(**m, pool, 256, 32);
  std::vector<float> logits(static_cast<size_t>(golden.vocab));
  ASSERT_TRUE(fwd.prefill(golden.prompt_ids, logits.data()).ok());
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(fwd.decode(test::argmax(logits.data(), golden.vocab), logits.data()).ok());

  bool ok = true;
  const int64_t decode_allocs = count_allocations([&] {
    for (int i = 0; i < 64; ++i) {
      ok &= fwd.decode(test::argmax(logits.data(), golden.vocab), logits.data()).ok();
    }
  });
  EXPECT_TRUE(ok);
  EXPECT_EQ(decode_allocs, 0);

  // A multi-chunk prefill after reset() reuses the same buffers.
  fwd.reset();
  const int64_t prefill_allocs =
      count_allocations([&] { ok &= fwd.prefill(golden.prompt_ids, logits.data()).ok(); });
  EXPECT_TRUE(ok);
  EXPECT_EQ(prefill_allocs, 0);
}

// The KV ring past its window, both eviction policies, a sink reading every evicted row: the
// steady state of an endless stream allocates nothing either (DESIGN.md §4).
TEST(DecodeAllocRing, DecodeAndPrefillPastTheWindowAllocateNothing) {
  ThreadPool pool(2);
  const auto dir = test::repo_fixtures() / "gemma4-text" / "e2b-mini";
  const test::FixtureGolden golden = test::read_fixture_golden(dir);
  auto m = Model::load(dir, LoadOptions{Quant::kAsStored, EmbedScale::kF32}, pool);
  ASSERT_TRUE(m.ok()) << m.error().message;
  struct Reader final : EvictionSink {
    void on_evict(std::span<const EvictedToken> tokens, const KvRows& rows) override {
      for (const EvictedToken& t : tokens) {
        for (int layer : rows.tiered_layers()) {
          rows.read_row(layer, t.slot, k, v);
          ++n;
        }
      }
    }
    float k[4096], v[4096];
    int64_t n = 0;
  } sink;
  for (EvictPolicy policy : {EvictPolicy::kFifo, EvictPolicy::kMass}) {
    RingConfig rc;
    rc.anchors = 2;
    rc.window = 16;
    rc.recall = 4;
    rc.evict = policy;
    CpuForward fwd(**m, pool, rc, 8);
    fwd.set_eviction_sink(&sink);
    std::vector<float> logits(static_cast<size_t>(golden.vocab));
    ASSERT_TRUE(fwd.prefill(golden.prompt_ids, logits.data()).ok());  // past A + W already
    bool ok = true;
    const int64_t allocs = count_allocations([&] {
      for (int i = 0; i < 64; ++i) {
        ok &= fwd.decode(test::argmax(logits.data(), golden.vocab), logits.data()).ok();
      }
      ok &= fwd.prefill(golden.prompt_ids, logits.data()).ok();
    });
    EXPECT_TRUE(ok);
    EXPECT_EQ(allocs, 0);
  }
  EXPECT_GT(sink.n, 0);
}

// Quiescence on (model/quiescence.h), skipping most tokens (a huge threshold) on dense-mini, whose
// skipped layers own KV: the skip path (carry, K/V of skipped layers) allocates nothing either.
TEST(DecodeAllocQuiescence, SkippingDecodeAllocatesNothing) {
  ThreadPool pool(2);
  const auto dir = test::repo_fixtures() / "gemma4-text" / "dense-mini";
  const test::FixtureGolden golden = test::read_fixture_golden(dir);
  auto m = Model::load(dir, LoadOptions{Quant::kAsStored, EmbedScale::kF32}, pool);
  ASSERT_TRUE(m.ok()) << m.error().message;
  CpuForward fwd(**m, pool, 256, 32);
  QuiescenceConfig qc;
  qc.threshold = 1e9f;
  fwd.set_quiescence(&qc);
  std::vector<float> logits(static_cast<size_t>(golden.vocab));
  ASSERT_TRUE(fwd.prefill(golden.prompt_ids, logits.data()).ok());
  bool ok = true;
  const int64_t allocs = count_allocations([&] {
    for (int i = 0; i < 32; ++i) {
      ok &= fwd.decode(test::argmax(logits.data(), golden.vocab), logits.data()).ok();
    }
  });
  EXPECT_TRUE(ok);
  EXPECT_EQ(allocs, 0);
  EXPECT_GT(fwd.quiescence_stats()->skipped_tokens, 20);
}

std::vector<int>* volatile g_sink = nullptr;  // keeps the compiler from eliding new/delete

TEST(DecodeAllocCounter, CountsAnAllocationWhileCounting) {
  const int64_t n = count_allocations([] {
    g_sink = new std::vector<int>(100);
    delete g_sink;
  });
  EXPECT_GE(n, 2);
}

INSTANTIATE_TEST_SUITE_P(DecodeAllocFixtures, DecodeAlloc,
                         ::testing::Values("e2b-mini", "dense-mini", "moe-mini"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string s = info.param;
                           std::string out;
                           bool up = true;
                           for (char ch : s) {
                             if (ch == '-') {
                               up = true;
                               continue;
                             }
                             out += up ? char(std::toupper(ch)) : ch;
                             up = false;
                           }
                           return out;
                         });

}  // namespace
}  // namespace infer

// The same counter for test/model/sampling_test.cpp (a sampled token allocates nothing).
namespace infer::test {
int64_t allocations_while(void (*f)(void*), void* ctx) {
  g_allocations.store(0);
  g_counting.store(true);
  f(ctx);
  g_counting.store(false);
  return g_allocations.load();
}
}  // namespace infer::test
