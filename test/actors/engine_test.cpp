// The plain Engine under the actors, without an actor system: against the bare decode loop, and
// its turn loop's stop conditions (gate_test.cpp has the Gate policy and QuietTracker).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <vector>

#include "actors/control.h"
#include "actors/engine.h"
#include "test/actors/fixture_model.h"

namespace infer::test {
namespace {

using actors::Decision;

TEST(Engine, StepsReproduceTheBareDecodeLoopAndKeepEveryTokenInTheContext) {
  ThreadPool pool(2);
  const Fixture f = load_fixture(fixture_dir("e2b-mini"), pool);
  ASSERT_NE(f.model, nullptr);
  actors::EngineOptions o;
  o.max_positions = kMaxPositions;
  o.end_ids = {1};
  o.prefill_chunk = 5;  // several chunks for the 24-id prompt
  actors::Engine engine(std::make_shared<CpuForward>(*f.model, pool, kMaxPositions), o);
  ASSERT_TRUE(engine.append(f.prompt).ok());
  auto fed = engine.feed(nullptr);
  ASSERT_TRUE(fed.ok() && *fed);
  std::vector<int32_t> got;
  for (int i = 0; i < 16; ++i) {
    auto s = engine.step();
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_FALSE(s->end);
    EXPECT_EQ(s->position, int64_t(f.prompt.size()) + i);
    got.push_back(s->id);
  }
  EXPECT_EQ(got, f.greedy);
  EXPECT_EQ(engine.position(), int64_t(f.prompt.size()) + 16);
  EXPECT_EQ(engine.fed(), engine.position() - 1);  // the last token is not fed yet
  EXPECT_EQ(engine.prefilled(), int64_t(f.prompt.size()));
  EXPECT_EQ(engine.decoded(), 15);
}

TEST(Engine, FeedStopsBetweenChunksAndKeepsTheRestPending) {
  ThreadPool pool(2);
  const Fixture f = load_fixture(fixture_dir("e2b-mini"), pool);
  ASSERT_NE(f.model, nullptr);
  actors::EngineOptions o;
  o.max_positions = kMaxPositions;
  o.prefill_chunk = 8;
  actors::Engine engine(std::make_shared<CpuForward>(*f.model, pool, kMaxPositions), o);
  ASSERT_TRUE(engine.append(f.prompt).ok());
  int chunks = 0;
  auto fed = engine.feed([&] { return chunks++ == 1; });  // stop before the second chunk
  ASSERT_TRUE(fed.ok());
  EXPECT_FALSE(*fed);
  EXPECT_EQ(engine.fed(), 8);
  EXPECT_EQ(engine.position(), int64_t(f.prompt.size()));
  auto s = engine.step();  // feeds the rest first
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->id, f.greedy[0]);
}

// The turn's hook for episodic memory runs once, with the input's positions, when all of the
// input but its last id is fed; feeding the last one separately leaves the tokens as they were.
TEST(Engine, BeforeGenerateSeesTheInputFedButItsLastId) {
  ThreadPool pool(2);
  const Fixture f = load_fixture(fixture_dir("e2b-mini"), pool);
  ASSERT_NE(f.model, nullptr);
  actors::EngineOptions o;
  o.max_positions = kMaxPositions;
  o.end_ids = {1};
  o.prefill_chunk = 7;
  std::vector<std::array<int64_t, 3>> calls;  // pos, n, fed
  actors::Engine* e = nullptr;
  o.before_generate = [&](int64_t pos, int64_t n) { calls.push_back({pos, n, e->fed()}); };
  actors::Engine engine(std::make_shared<CpuForward>(*f.model, pool, kMaxPositions), o);
  e = &engine;
  struct Collect final : actors::TokenSink {
    actors::Verdict token(const actors::Step& s) override {
      ids.push_back(s.id);
      return actors::Verdict::kKeep;
    }
    std::vector<int32_t> ids;
  } sink;
  actors::TurnRequest req;
  req.input = f.prompt;
  req.max_tokens = 16;
  const actors::TurnOutcome out = engine.run_turn(req, sink);
  ASSERT_FALSE(out.error) << out.error->message;
  EXPECT_EQ(sink.ids, f.greedy);
  const int64_t n = int64_t(f.prompt.size());
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], (std::array<int64_t, 3>{0, n, n - 1}));
  // A turn that only appends calls nothing.
  actors::TurnRequest append_only;
  append_only.input = f.prompt;
  engine.run_turn(append_only, sink);
  EXPECT_EQ(calls.size(), 1u);
}

// --serve appends in turns of their own: with the hook, such a turn leaves its last id pending,
// so the GENERATE after it still recalls before that id is fed (and generates the same tokens).
// When something read everything meanwhile (a memory store), the hook still sees the positions.
TEST(Engine, WithTheHookAnInputOnlyTurnLeavesItsLastIdForTheNextGeneration) {
  ThreadPool pool(2);
  const Fixture f = load_fixture(fixture_dir("e2b-mini"), pool);
  ASSERT_NE(f.model, nullptr);
  const int64_t n = int64_t(f.prompt.size());
  for (const bool read_all_first : {false, true}) {
    actors::EngineOptions o;
    o.max_positions = kMaxPositions;
    o.end_ids = {1};
    std::vector<std::array<int64_t, 3>> calls;  // pos, n, fed
    actors::Engine* e = nullptr;
    o.before_generate = [&](int64_t pos, int64_t k) { calls.push_back({pos, k, e->fed()}); };
    actors::Engine engine(std::make_shared<CpuForward>(*f.model, pool, kMaxPositions), o);
    e = &engine;
    struct Collect final : actors::TokenSink {
      actors::Verdict token(const actors::Step& s) override {
        ids.push_back(s.id);
        return actors::Verdict::kKeep;
      }
      std::vector<int32_t> ids;
    } sink;
    actors::TurnRequest append_only;
    append_only.input = f.prompt;
    ASSERT_FALSE(engine.run_turn(append_only, sink).error);
    EXPECT_EQ(engine.fed(), n - 1);
    EXPECT_TRUE(calls.empty());
    if (read_all_first) {
      ASSERT_TRUE(engine.feed(nullptr).ok());
      EXPECT_EQ(engine.fed(), n);
    }
    actors::TurnRequest generate;
    generate.max_tokens = 16;
    const actors::TurnOutcome out = engine.run_turn(generate, sink);
    ASSERT_FALSE(out.error) << out.error->message;
    EXPECT_EQ(sink.ids, f.greedy) << "read_all_first " << read_all_first;
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(calls[0], (std::array<int64_t, 3>{0, n, read_all_first ? n : n - 1}));
  }
}

TEST(Engine, RefusesIdsOutsideTheVocabularyAndPastTheContext) {
  ThreadPool pool(2);
  const Fixture f = load_fixture(fixture_dir("e2b-mini"), pool);
  ASSERT_NE(f.model, nullptr);
  actors::EngineOptions o;
  o.max_positions = 4;
  actors::Engine engine(std::make_shared<CpuForward>(*f.model, pool, 4), o);
  EXPECT_FALSE(engine.append(std::vector<int32_t>{2, 512}).ok());
  EXPECT_FALSE(engine.append(std::vector<int32_t>{2, 3, 4, 5, 6}).ok());
  EXPECT_EQ(engine.position(), 0);
  EXPECT_FALSE(engine.step().ok());  // nothing to continue
}

// Records what the loop hands it; at `index` it answers `verdict`, or bumps the interrupt.
class TestSink : public actors::TokenSink {
 public:
  actors::Verdict token(const actors::Step& s) override {
    ids.push_back(s.id);
    positions.push_back(s.position);
    if (s.index == at && interrupt != nullptr) interrupt->interrupt_epoch.fetch_add(1);
    return s.index == at ? verdict : actors::Verdict::kKeep;
  }
  std::vector<int32_t> ids;
  std::vector<int64_t> positions;
  int64_t at = -1;
  actors::Verdict verdict = actors::Verdict::kKeep;
  actors::Control* interrupt = nullptr;
};

// The first index k >= 2 whose greedy token does not occur before it.
size_t first_new_token(const std::vector<int32_t>& greedy) {
  for (size_t k = 2; k < greedy.size(); ++k) {
    if (std::find(greedy.begin(), greedy.begin() + ptrdiff_t(k), greedy[k]) ==
        greedy.begin() + ptrdiff_t(k)) {
      return k;
    }
  }
  return 0;
}

class EngineTurn : public ::testing::Test {
 protected:
  void SetUp() override {
    fixture_ = load_fixture(fixture_dir("e2b-mini"), pool_);
    ASSERT_NE(fixture_.model, nullptr);
    k_ = first_new_token(fixture_.greedy);
    ASSERT_GE(k_, 2u);
  }
  std::unique_ptr<actors::Engine> engine(std::vector<int32_t> end_ids = {}) {
    actors::EngineOptions o;
    o.max_positions = kMaxPositions;
    o.end_ids = std::move(end_ids);
    return std::make_unique<actors::Engine>(
        std::make_shared<CpuForward>(*fixture_.model, pool_, kMaxPositions), o);
  }
  actors::TurnRequest request(int64_t max_tokens) const {
    actors::TurnRequest r;
    r.input = fixture_.prompt;
    r.max_tokens = max_tokens;
    return r;
  }
  std::vector<int32_t> greedy(size_t n) const {
    return std::vector<int32_t>(fixture_.greedy.begin(), fixture_.greedy.begin() + ptrdiff_t(n));
  }
  int64_t prompt_size() const { return int64_t(fixture_.prompt.size()); }

  ThreadPool pool_{2};
  Fixture fixture_;
  size_t k_ = 0;  // greedy[k_] is new at k_: as an end or stop id it ends the turn there
};

TEST_F(EngineTurn, EndIdsStopBeforeOrAfterTheTokenOrAreOrdinaryTokens) {
  const int32_t end = fixture_.greedy[k_];
  {
    auto e = engine({end});
    TestSink sink;
    const actors::TurnOutcome o = e->run_turn(request(16), sink);  // EndIds::kStopBefore
    EXPECT_EQ(o.reason, actors::StopReason::kEndToken);
    EXPECT_EQ(o.stop_id, end);
    EXPECT_EQ(sink.ids, greedy(k_));
    EXPECT_EQ(o.generated, int64_t(k_));
    EXPECT_EQ(e->position(), prompt_size() + int64_t(k_));  // not in the context
  }
  {
    auto e = engine({end});
    TestSink sink;
    actors::TurnRequest r = request(16);
    r.end_ids = actors::EndIds::kStopAfter;
    const actors::TurnOutcome o = e->run_turn(r, sink);
    EXPECT_EQ(o.reason, actors::StopReason::kEndToken);
    EXPECT_EQ(sink.ids, greedy(k_ + 1));
    EXPECT_EQ(e->position(), prompt_size() + int64_t(k_) + 1);  // emitted and kept
    EXPECT_EQ(e->context().back(), end);
  }
  {
    auto e = engine({end});
    TestSink sink;
    actors::TurnRequest r = request(16);
    r.end_ids = actors::EndIds::kIgnore;
    const actors::TurnOutcome o = e->run_turn(r, sink);
    EXPECT_EQ(o.reason, actors::StopReason::kTokenLimit);
    EXPECT_EQ(sink.ids, fixture_.greedy);
  }
}

TEST_F(EngineTurn, AStopIdEndsTheTurnBeforeAnythingPastItIsComputed) {
  auto e = engine();
  TestSink sink;
  actors::TurnRequest r = request(16);
  const std::vector<int32_t> stop = {fixture_.greedy[k_]};
  r.stop_ids = stop;
  const actors::TurnOutcome o = e->run_turn(r, sink);
  EXPECT_EQ(o.reason, actors::StopReason::kStopId);
  EXPECT_EQ(o.stop_id, stop[0]);
  EXPECT_EQ(sink.ids, greedy(k_ + 1));
  EXPECT_EQ(e->position(), prompt_size() + int64_t(k_) + 1);
  EXPECT_EQ(sink.positions.back() + 1, e->position());  // the last token sent ends the context
  EXPECT_EQ(e->fed(), e->position() - 1);
}

TEST_F(EngineTurn, TheSinkCanEndTheTurnWithATokenOrRefuseIt) {
  {
    auto e = engine();
    TestSink sink;
    sink.at = 2;
    sink.verdict = actors::Verdict::kLast;
    const actors::TurnOutcome o = e->run_turn(request(16), sink);
    EXPECT_EQ(o.reason, actors::StopReason::kSink);
    EXPECT_EQ(o.generated, 3);
    EXPECT_EQ(e->position(), prompt_size() + 3);
  }
  {
    auto e = engine();
    TestSink sink;
    sink.at = 2;
    sink.verdict = actors::Verdict::kRefuse;
    const actors::TurnOutcome o = e->run_turn(request(16), sink);
    EXPECT_EQ(o.reason, actors::StopReason::kSink);
    EXPECT_EQ(o.generated, 2);
    EXPECT_EQ(sink.ids.size(), 3u);                  // the refused one was offered
    EXPECT_EQ(e->position(), prompt_size() + 2);     // and is not in the context
    // The next turn continues from the context without it.
    TestSink next;
    actors::TurnRequest r;
    r.max_tokens = 1;
    EXPECT_EQ(e->run_turn(r, next).generated, 1);
    EXPECT_EQ(next.ids, std::vector<int32_t>{fixture_.greedy[2]});
  }
}

TEST_F(EngineTurn, AnInterruptBetweenTokensStopsTheNextOne) {
  auto e = engine();
  actors::Control control;
  control.gate_seen.store(int64_t(1) << 40);  // no gate here: the loop never waits for it
  TestSink sink;
  sink.at = 1;
  sink.interrupt = &control;
  actors::TurnRequest r = request(16);
  r.control.control = &control;
  r.control.epoch = control.interrupt_epoch.load();
  const actors::TurnOutcome o = e->run_turn(r, sink);
  EXPECT_EQ(o.reason, actors::StopReason::kInterrupted);
  EXPECT_EQ(sink.ids, greedy(2));
  EXPECT_EQ(o.generated, 2);
}

}  // namespace
}  // namespace infer::test
