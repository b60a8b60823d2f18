// The actor pipeline on the golden fixtures: the same greedy tokens as the bare decode loop, an
// interrupt that lands within one token and a conversation that continues after it, the gate's
// default policy and a threshold, consolidation's quiet spans, /reset and /stats.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "actors/control.h"
#include "actors/pipeline.h"
#include "test/actors/fixture_model.h"
#include "test/actors/recording_front_end.h"

namespace infer::test {
namespace {

using actors::Decision;
using actors::Pipeline;
using actors::PipelineOptions;
using actors::StopReason;

class PipelineTest : public ::testing::Test {
 protected:
  void load(const char* name) {
    fixture_ = load_fixture(fixture_dir(name), pool_);
    ASSERT_NE(fixture_.model, nullptr);
  }
  std::shared_ptr<Forward> forward() {
    return std::make_shared<CpuForward>(*fixture_.model, pool_, kMaxPositions);
  }
  PipelineOptions options() {
    PipelineOptions o;
    o.engine.sampling.temperature = 0.0f;
    o.engine.end_ids = {1};  // the fixtures' eos
    o.engine.max_positions = kMaxPositions;
    return o;
  }

  ThreadPool pool_{2};
  Fixture fixture_;
  RecordingFrontEnd front_;
};

TEST_F(PipelineTest, GreedyTokensEqualTheBareDecodeLoopOnEveryFixture) {
  for (const char* name : {"e2b-mini", "dense-mini", "moe-mini"}) {
    SCOPED_TRACE(name);
    load(name);
    CpuForward bare_fwd(*fixture_.model, pool_, kMaxPositions);
    const std::vector<int32_t> end_ids = {1};
    const std::vector<int32_t> bare = bare_greedy(bare_fwd, fixture_.prompt, 16, end_ids);
    EXPECT_EQ(bare, fixture_.greedy);

    RecordingFrontEnd front;
    Pipeline p(forward(), options(), front);
    const uint64_t turn = p.send("", fixture_.prompt, true, 16);
    const auto end = front.wait_turn(turn);
    ASSERT_TRUE(end.has_value());
    EXPECT_EQ(end->reason, StopReason::kTokenLimit);
    EXPECT_EQ(end->generated, 16);
    EXPECT_EQ(end->position, int64_t(fixture_.prompt.size()) + 16);
    EXPECT_EQ(front.ids(turn), bare);
    // The default gate speaks on every step; the signals are probabilities.
    for (const auto& t : front.tokens(turn)) {
      EXPECT_EQ(t.decision, Decision::kSpeak);
      EXPECT_GT(t.top_prob, 0.0f);
      EXPECT_LE(t.top_prob, 1.0f);
      EXPECT_GE(t.eot_prob, 0.0f);
      EXPECT_LE(t.eot_prob, t.top_prob + 1e-6f);  // eos was never the argmax here
      EXPECT_GE(t.entropy, 0.0f);
    }
    EXPECT_TRUE(front.errors().empty());
  }
}

// Interrupts from inside the stream's own token span (the tracer hook runs on the stream thread
// right after it sends a token), so "within one token" is exact: no token may follow.
class InterruptAtStep : public actors::Tracer {
 public:
  explicit InterruptAtStep(int64_t step) : step_(step) {}
  void span(const char* actor, const char* what, int64_t, int64_t, int64_t arg) override {
    if (std::string_view(actor) == "stream" && std::string_view(what) == "token" &&
        arg == step_ && !fired_.exchange(true)) {
      pipeline_.load()->interrupt();
    }
  }
  std::atomic<Pipeline*> pipeline_{nullptr};

 private:
  int64_t step_;
  std::atomic<bool> fired_{false};
};

TEST_F(PipelineTest, AnInterruptStopsWithinOneTokenAndTheConversationContinues) {
  load("e2b-mini");
  InterruptAtStep tracer(2);
  PipelineOptions o = options();
  o.tracer = &tracer;
  auto p = std::make_unique<Pipeline>(forward(), o, front_);
  tracer.pipeline_ = p.get();
  const uint64_t t1 = p->send("", fixture_.prompt, true, 16);
  const auto end1 = front_.wait_turn(t1);
  ASSERT_TRUE(end1.has_value());
  EXPECT_EQ(end1->reason, StopReason::kInterrupted);
  EXPECT_EQ(end1->generated, 3);  // steps 0, 1, 2; the interrupt came during step 2
  const std::vector<int32_t> first = front_.ids(t1);
  EXPECT_EQ(first, std::vector<int32_t>(fixture_.greedy.begin(), fixture_.greedy.begin() + 3));
  EXPECT_EQ(end1->position, int64_t(fixture_.prompt.size()) + 3);

  // The next turn starts from the interrupted context: prompt, the 3 tokens, the new input.
  const std::vector<int32_t> more = {17, 99};
  const uint64_t t2 = p->send("", more, true, 6);
  const auto end2 = front_.wait_turn(t2);
  ASSERT_TRUE(end2.has_value());
  EXPECT_EQ(end2->reason, StopReason::kTokenLimit);
  EXPECT_EQ(end2->position, end1->position + 2 + 6);
  const auto tokens2 = front_.tokens(t2);
  ASSERT_FALSE(tokens2.empty());
  EXPECT_EQ(tokens2.front().position, end1->position + 2);  // positions keep counting

  // The same calls without actors: prefill, decode the first two tokens, then prefill the
  // third (never fed during turn 1) with the new input.
  CpuForward bare(*fixture_.model, pool_, kMaxPositions);
  std::vector<float> logits(size_t(bare.vocab_size()));
  ASSERT_TRUE(bare.prefill(fixture_.prompt, logits.data()).ok());
  ASSERT_TRUE(bare.decode(first[0], logits.data()).ok());
  ASSERT_TRUE(bare.decode(first[1], logits.data()).ok());
  const std::vector<int32_t> resume = {first[2], more[0], more[1]};
  EXPECT_EQ(front_.ids(t2), bare_greedy(bare, resume, 6));

  const auto st = p->stats(true);
  ASSERT_TRUE(st.ok()) << st.error().message;
  std::vector<int32_t> context = fixture_.prompt;
  context.insert(context.end(), first.begin(), first.end());
  context.insert(context.end(), more.begin(), more.end());
  for (int32_t id : front_.ids(t2)) context.push_back(id);
  EXPECT_EQ(st->context, context);
  EXPECT_EQ(st->position, int64_t(context.size()));
  EXPECT_EQ(st->fed, st->position - 1);  // the last token waits for the next turn
  EXPECT_EQ(st->turns, 2u);
  EXPECT_EQ(st->generated, 9);
  tracer.pipeline_ = nullptr;
  p.reset();
}

TEST_F(PipelineTest, AnInterruptBeforeTheTurnStartsStopsItButNotLaterInput) {
  load("e2b-mini");
  Pipeline p(forward(), options(), front_);
  // 400 tokens take far longer than the next line does.
  const uint64_t t1 = p.send("", fixture_.prompt, true, 400);
  p.interrupt();  // sent after t1: stops it wherever it is, at the latest before its first token
  const auto end1 = front_.wait_turn(t1);
  ASSERT_TRUE(end1.has_value());
  EXPECT_EQ(end1->reason, StopReason::kInterrupted);
  const uint64_t t2 = p.send("", {17}, true, 4);
  const auto end2 = front_.wait_turn(t2);
  ASSERT_TRUE(end2.has_value());
  EXPECT_EQ(end2->reason, StopReason::kTokenLimit);
  EXPECT_EQ(end2->generated, 4);
}

TEST_F(PipelineTest, AnEntropyThresholdMakesTheGateStopEarly) {
  load("e2b-mini");
  PipelineOptions o = options();
  o.gate.max_entropy = 0.0f;  // every step of a random model is above 0 nats
  Pipeline p(forward(), o, front_);
  const uint64_t turn = p.send("", fixture_.prompt, true, 200);
  const auto end = front_.wait_turn(turn);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->reason, StopReason::kGate);
  EXPECT_GE(end->generated, 1);
  EXPECT_LE(end->generated, actors::kGateLead);
  const auto tokens = front_.tokens(turn);
  ASSERT_FALSE(tokens.empty());
  EXPECT_EQ(tokens.front().decision, Decision::kListen);
  // What the stream generated before the stop took effect is the greedy continuation.
  EXPECT_EQ(front_.ids(turn),
            std::vector<int32_t>(fixture_.greedy.begin(), fixture_.greedy.begin() + end->generated));
  const auto st = p.stats();
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(st->listen, end->generated);
  EXPECT_EQ(st->speak, 0);
}

TEST_F(PipelineTest, ConsolidationReportsTheQuietSpanAfterTheDebounce) {
  load("e2b-mini");
  PipelineOptions o = options();
  o.consolidate_after_s = 0.05;
  Pipeline p(forward(), o, front_);
  const uint64_t t1 = p.send("", fixture_.prompt, true, 4);
  const auto end1 = front_.wait_turn(t1);
  ASSERT_TRUE(end1.has_value());
  const auto q1 = front_.wait_quiet(1);
  ASSERT_TRUE(q1.has_value());
  EXPECT_EQ(q1->from, 0);
  EXPECT_EQ(q1->to, end1->position);
  // The next span starts where the last one ended.
  const uint64_t t2 = p.send("", {17, 99}, true, 3);
  const auto end2 = front_.wait_turn(t2);
  ASSERT_TRUE(end2.has_value());
  const auto q2 = front_.wait_quiet(2);
  ASSERT_TRUE(q2.has_value());
  EXPECT_EQ(q2->from, end1->position);
  EXPECT_EQ(q2->to, end2->position);
}

TEST_F(PipelineTest, ResetEmptiesTheContextAndRepeatsTheFirstTurn) {
  load("e2b-mini");
  Pipeline p(forward(), options(), front_);
  const uint64_t t1 = p.send("", fixture_.prompt, true, 8);
  ASSERT_TRUE(front_.wait_turn(t1).has_value());
  p.reset();
  ASSERT_TRUE(front_.wait_resets(1));
  const auto st = p.stats();
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(st->position, 0);
  EXPECT_EQ(st->fed, 0);
  const uint64_t t2 = p.send("", fixture_.prompt, true, 8);
  ASSERT_TRUE(front_.wait_turn(t2).has_value());
  EXPECT_EQ(front_.ids(t2), front_.ids(t1));
}

TEST_F(PipelineTest, BadInputIsAnErrorAndTheSessionGoesOn) {
  load("e2b-mini");
  Pipeline p(forward(), options(), front_);
  const uint64_t t1 = p.send("", {2, 100000}, true, 4);  // outside the vocabulary
  const auto end1 = front_.wait_turn(t1);
  ASSERT_TRUE(end1.has_value());
  EXPECT_EQ(end1->reason, StopReason::kError);
  EXPECT_EQ(end1->position, 0);
  const uint64_t t2 = p.send("text", {}, true, 4);  // no tokenizer for this fixture
  const auto end2 = front_.wait_turn(t2);
  ASSERT_TRUE(end2.has_value());
  EXPECT_EQ(end2->reason, StopReason::kNoGenerate);
  // Errors cross the actors as caf::error and come back with our code and message.
  const auto errors = front_.errors();
  ASSERT_EQ(errors.size(), 2u);
  for (const auto& e : errors) EXPECT_EQ(e.code, ErrorCode::kInvalidArgument);
  EXPECT_NE(errors[0].message.find("100000"), std::string::npos) << errors[0].message;
  EXPECT_NE(errors[1].message.find("tokenizer.json"), std::string::npos) << errors[1].message;
  const uint64_t t3 = p.send("", fixture_.prompt, true, 4);
  const auto end3 = front_.wait_turn(t3);
  ASSERT_TRUE(end3.has_value());
  EXPECT_EQ(front_.ids(t3), std::vector<int32_t>(fixture_.greedy.begin(), fixture_.greedy.begin() + 4));
}

}  // namespace
}  // namespace infer::test
