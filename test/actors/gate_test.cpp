// The Gate policy's thresholds and pending interrupts, and QuietTracker's debounce bookkeeping:
// plain classes under the actors, without an actor system.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>

#include "actors/gate.h"
#include "actors/quiet_tracker.h"

namespace infer::test {
namespace {

using actors::Decision;

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

// Pending interrupts are urgency: act at the threshold, or when the rest of the turn costs too
// much; user input and the step's own thresholds come first.
TEST(Gate, PendingInterruptsActAtTheirThresholdOrPastTheCost) {
  std::atomic<int64_t> pending{0};
  actors::GateOptions o;
  o.pending_interrupts = &pending;
  EXPECT_EQ(actors::Gate(o).decide(signals(1.0f, 0.6f, 0.0f), {}), Decision::kSpeak);
  pending.store(3);  // no threshold set: read, not acted on
  EXPECT_EQ(actors::Gate(o).decide(signals(1.0f, 0.6f, 0.0f), {}), Decision::kSpeak);
  o.act_on_interrupts = 2;
  pending.store(1);
  const actors::Gate gate(o);  // reads the counter at each decision, not at construction
  EXPECT_EQ(gate.decide(signals(1.0f, 0.6f, 0.0f), {}), Decision::kSpeak);
  pending.store(2);
  EXPECT_EQ(gate.decide(signals(1.0f, 0.6f, 0.0f), {}), Decision::kAct);
  pending.store(0);
  actors::GateContext ctx;
  ctx.pending_interrupts = 2;  // counted by the caller instead
  EXPECT_EQ(gate.decide(signals(1.0f, 0.6f, 0.0f), ctx), Decision::kAct);
  // Input and uncertainty outrank tool output.
  o.yield_to_input = true;
  o.max_entropy = 2.0f;
  pending.store(5);
  EXPECT_EQ(actors::Gate(o).decide(signals(1.0f, 0.6f, 0.0f), {1, 10}), Decision::kListen);
  EXPECT_EQ(actors::Gate(o).decide(signals(2.5f, 0.6f, 0.0f), {}), Decision::kListen);
  EXPECT_EQ(actors::Gate(o).decide(signals(1.0f, 0.6f, 0.0f), {}), Decision::kAct);
  // By cost: 10 ms/token, 500 ms allowed.
  o = {};
  o.pending_interrupts = &pending;
  o.max_cost_ms = 500.0f;
  pending.store(1);
  EXPECT_EQ(actors::Gate(o).decide(signals(1.0f, 0.6f, 0.0f), {0, 60}), Decision::kSpeak);
  o.interrupts_weigh_cost = true;
  EXPECT_EQ(actors::Gate(o).decide(signals(1.0f, 0.6f, 0.0f), {0, 40}), Decision::kSpeak);
  EXPECT_EQ(actors::Gate(o).decide(signals(1.0f, 0.6f, 0.0f), {0, 60}), Decision::kAct);
  pending.store(0);
  EXPECT_EQ(actors::Gate(o).decide(signals(1.0f, 0.6f, 0.0f), {0, 60}), Decision::kSpeak);
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
