// Engine::run_turn allocates nothing per token once a turn runs (engine.h): global operator
// new/delete are replaced in this test binary by counting versions, which count only on a thread
// that asked for it, so the actor systems of the other tests are unaffected.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>

#include "actors/engine.h"
#include "test/actors/fixture_model.h"

// The replacements below pair malloc with free by design; GCC cannot see that through inlining.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {

thread_local bool t_counting = false;
thread_local int64_t t_allocations = 0;

void* counted_alloc(std::size_t n, std::size_t align) {
  if (t_counting) ++t_allocations;
  if (n == 0) n = 1;
  return align <= alignof(std::max_align_t)
             ? std::malloc(n)
             : std::aligned_alloc(align, (n + align - 1) / align * align);
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


namespace infer::test {
namespace {

// Counts the allocations on the loop's thread from the second token to the last: the steady
// state (the first step may still size buffers).
class CountingSink : public actors::TokenSink {
 public:
  explicit CountingSink(int64_t last) : last_(last) {}
  actors::Verdict token(const actors::Step& s) override {
    if (s.index == 1) t_counting = true;
    if (s.index == last_) t_counting = false;
    ++tokens;
    return actors::Verdict::kKeep;
  }
  int64_t tokens = 0;

 private:
  int64_t last_;
};

TEST(EngineAllocations, ATurnAllocatesNothingPerToken) {
  ThreadPool pool(2);
  const Fixture f = load_fixture(fixture_dir("e2b-mini"), pool);
  ASSERT_NE(f.model, nullptr);
  actors::EngineOptions o;
  o.max_positions = kMaxPositions;
  o.end_ids = {1};
  // Injection hooked in but nothing acked: one atomic load a token, nothing allocated.
  std::atomic<int64_t> nothing_acked{0};
  int takes = 0;
  o.boundary.ready = &nothing_acked;
  o.boundary.take = [&](std::vector<int32_t>&, int64_t) {
    ++takes;
    return actors::Injection::kNothing;
  };
  actors::Engine engine(std::make_shared<CpuForward>(*f.model, pool, kMaxPositions), o);
  actors::Control control;
  control.gate_seen.store(int64_t(1) << 40);  // no gate here: the loop never waits for it
  for (const bool own_sampling : {false, true}) {
    SCOPED_TRACE(own_sampling ? "the request's own sampler" : "the session's sampler");
    SamplingParams params;
    params.temperature = 0.8f;
    params.top_k = 40;
    params.seed = 3;
    constexpr int64_t kTokens = 24;
    actors::TurnRequest r;
    r.input = f.prompt;
    r.max_tokens = kTokens;
    r.end_ids = actors::EndIds::kIgnore;
    r.sampling = own_sampling ? &params : nullptr;
    r.control.control = &control;  // the interrupt and the gate's stop are read each step
    CountingSink sink(kTokens - 1);
    t_allocations = 0;
    const actors::TurnOutcome out = engine.run_turn(r, sink);
    t_counting = false;
    EXPECT_EQ(out.generated, kTokens);
    EXPECT_EQ(t_allocations, 0);
    EXPECT_EQ(takes, 0);
    engine.reset();
  }
}

}  // namespace
}  // namespace infer::test
