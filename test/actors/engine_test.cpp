// The plain classes under the actors, without an actor system: Engine against the bare decode
// loop, the Gate policy's thresholds, and QuietTracker's debounce bookkeeping.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "actors/engine.h"
#include "actors/gate.h"
#include "actors/quiet_tracker.h"
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

actors::TokenEvent signals(float entropy, float top_prob, float eot_prob, int32_t id = 7) {
  actors::TokenEvent t;
  t.id = id;
  t.entropy = entropy;
  t.top_prob = top_prob;
  t.eot_prob = eot_prob;
  t.ms_per_token = 10.0f;
  return t;
}

TEST(Gate, TheDefaultPolicyAlwaysSpeaks) {
  const actors::Gate gate{actors::GateOptions{}};
  for (float h : {0.0f, 1.0f, 12.0f}) {
    EXPECT_EQ(gate.decide(signals(h, 0.01f, 0.99f), {5, 1000}), Decision::kSpeak);
  }
}

TEST(Gate, EachThresholdStopsOnlyPastItsValue) {
  actors::GateOptions o;
  o.max_entropy = 2.0f;
  EXPECT_EQ(actors::Gate(o).decide(signals(1.9f, 0.5f, 0.0f), {}), Decision::kSpeak);
  EXPECT_EQ(actors::Gate(o).decide(signals(2.1f, 0.5f, 0.0f), {}), Decision::kListen);
  o = {};
  o.min_top_prob = 0.3f;
  EXPECT_EQ(actors::Gate(o).decide(signals(1.0f, 0.31f, 0.0f), {}), Decision::kSpeak);
  EXPECT_EQ(actors::Gate(o).decide(signals(1.0f, 0.29f, 0.0f), {}), Decision::kListen);
  o = {};
  o.end_prob = 0.5f;
  EXPECT_EQ(actors::Gate(o).decide(signals(1.0f, 0.6f, 0.4f), {}), Decision::kSpeak);
  EXPECT_EQ(actors::Gate(o).decide(signals(1.0f, 0.6f, 0.5f), {}), Decision::kListen);
  o = {};
  o.yield_to_input = true;
  EXPECT_EQ(actors::Gate(o).decide(signals(1.0f, 0.6f, 0.0f), {0, 100}), Decision::kSpeak);
  EXPECT_EQ(actors::Gate(o).decide(signals(1.0f, 0.6f, 0.0f), {1, 100}), Decision::kListen);
  o = {};
  o.max_cost_ms = 500.0f;  // 10 ms/token
  EXPECT_EQ(actors::Gate(o).decide(signals(1.0f, 0.6f, 0.0f), {1, 40}), Decision::kSpeak);
  EXPECT_EQ(actors::Gate(o).decide(signals(1.0f, 0.6f, 0.0f), {1, 60}), Decision::kListen);
  EXPECT_EQ(actors::Gate(o).decide(signals(1.0f, 0.6f, 0.0f), {0, 60}), Decision::kSpeak);
  o = {};
  o.act_ids = {42};
  EXPECT_EQ(actors::Gate(o).decide(signals(1.0f, 0.6f, 0.0f, 42), {}), Decision::kAct);
  EXPECT_EQ(actors::Gate(o).decide(signals(1.0f, 0.6f, 0.0f, 41), {}), Decision::kSpeak);
}

TEST(QuietTracker, FiresOnlyForTheLatestTimerWhenIdleAndSomethingIsNew) {
  actors::QuietTracker q;
  q.input();
  q.input();
  EXPECT_FALSE(q.turn_end(10).has_value());  // the second input still waits for its turn
  const auto g1 = q.turn_end(20);
  ASSERT_TRUE(g1.has_value());
  const auto span = q.fire(*g1);
  ASSERT_TRUE(span.has_value());
  EXPECT_EQ(span->from, 0);
  EXPECT_EQ(span->to, 20);
  EXPECT_FALSE(q.fire(*g1).has_value());  // nothing new since
  q.input();
  const auto g2 = q.turn_end(30);
  ASSERT_TRUE(g2.has_value());
  q.input();  // input before the timer fired: that timer is stale
  EXPECT_FALSE(q.fire(*g2).has_value());
  const auto g3 = q.turn_end(35);
  ASSERT_TRUE(g3.has_value());
  const auto span2 = q.fire(*g3);
  ASSERT_TRUE(span2.has_value());
  EXPECT_EQ(span2->from, 20);
  EXPECT_EQ(span2->to, 35);
  q.reset();
  q.input();
  const auto g4 = q.turn_end(5);
  ASSERT_TRUE(g4.has_value());
  EXPECT_EQ(q.fire(*g4)->from, 0);
}

}  // namespace
}  // namespace infer::test
