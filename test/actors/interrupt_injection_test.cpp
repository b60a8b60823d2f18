// Injection at the token boundary (EngineOptions::boundary, actors/interrupt_injection.h): ids
// join the context once, in order, between two generated tokens, and are fed before the next
// step; acked interrupts arrive framed as tool responses through the real tokenizer.
#include "actors/interrupt_injection.h"
#include "actors/pipeline.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/engine.h"
#include "model/tool_format/tool_writer.h"
#include "test/actors/fixture_model.h"
#include "test/actors/recording_front_end.h"
#include "tools_vfs/interrupts.h"

namespace infer::test {
namespace {

// Keeps every token; at token index `at` it runs `act` (an ack from "another thread").
class ActingSink : public actors::TokenSink {
 public:
  actors::Verdict token(const actors::Step& s) override {
    ids.push_back(s.id);
    positions.push_back(s.position);
    if (s.index == at && act) act();
    return actors::Verdict::kKeep;
  }
  void injected(int64_t position, int64_t n) override { injections.push_back({position, n}); }

  int64_t at = -1;
  std::function<void()> act;
  std::vector<int32_t> ids;
  std::vector<int64_t> positions;
  std::vector<std::pair<int64_t, int64_t>> injections;
};

// The e2b-vocab fixture (the real Gemma 4 vocabulary, tiny weights) and its tokenizer.
struct VocabModel {
  std::unique_ptr<Model> model;
  std::optional<Tokenizer> tok;
  std::vector<int32_t> prompt;
};
VocabModel load_vocab_model(ThreadPool& pool) {
  const std::filesystem::path dir = shared_fixtures() / "gemma4-text" / "e2b-vocab";
  VocabModel v;
  auto m = Model::load(dir, LoadOptions{}, pool);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  if (m.ok()) v.model = std::move(m).value();
  Result<Tokenizer> tok = Tokenizer::load(dir / "tokenizer.json");
  EXPECT_TRUE(tok.ok()) << (tok.ok() ? "" : tok.error().message);
  if (!tok.ok()) return v;
  v.tok.emplace(std::move(tok).value());
  v.prompt = v.tok->encode("<|turn>user\nRun make.<turn|>\n<|turn>model\n", true);
  return v;
}

actors::TurnRequest greedy_turn(std::span<const int32_t> input, int64_t n) {
  actors::TurnRequest r;
  r.input = input;
  r.max_tokens = n;
  r.end_ids = actors::EndIds::kIgnore;
  return r;
}

TEST(BoundaryInjection, IdsJoinOnceBetweenTwoTokensAndAreFedBeforeTheNextStep) {
  ThreadPool pool(2);
  const Fixture f = load_fixture(fixture_dir("e2b-mini"), pool);
  ASSERT_NE(f.model, nullptr);
  const std::vector<int32_t> extra = {5, 6, 7, 8};
  std::atomic<int64_t> ready{0};
  int takes = 0;
  actors::EngineOptions o;
  o.max_positions = kMaxPositions;
  o.boundary.ready = &ready;
  o.boundary.take = [&](std::vector<int32_t>& ids, int64_t room) {
    ++takes;
    EXPECT_TRUE(ids.empty());
    EXPECT_GT(room, int64_t(extra.size()));
    ids.assign(extra.begin(), extra.end());
    ready.store(0);
    return actors::Injection::kIds;
  };
  actors::Engine engine(std::make_shared<CpuForward>(*f.model, pool, kMaxPositions), o);
  ActingSink sink;
  sink.at = 2;
  sink.act = [&] { ready.store(1); };
  const actors::TurnOutcome out = engine.run_turn(greedy_turn(f.prompt, 6), sink);
  ASSERT_EQ(out.reason, actors::StopReason::kTokenLimit);
  EXPECT_EQ(takes, 1);
  const int64_t P = int64_t(f.prompt.size());
  // The context: prompt, three tokens, the injected ids, three more tokens.
  std::vector<int32_t> expect(f.prompt);
  expect.insert(expect.end(), sink.ids.begin(), sink.ids.begin() + 3);
  expect.insert(expect.end(), extra.begin(), extra.end());
  expect.insert(expect.end(), sink.ids.begin() + 3, sink.ids.end());
  EXPECT_EQ(engine.context(), expect);
  ASSERT_EQ(sink.injections.size(), 1u);
  EXPECT_EQ(sink.injections[0], std::make_pair(P + 3 + 4, int64_t(4)));
  EXPECT_EQ(sink.positions[3], P + 3 + 4);  // the next token sits after the injected ids
  EXPECT_EQ(engine.injected(), 4);
  // Fed before the next step: the tokens after the injection are those of a plain greedy run
  // over the prompt, the first three tokens and the injected ids.
  CpuForward plain(*f.model, pool, kMaxPositions);
  std::vector<int32_t> prefix(expect.begin(), expect.begin() + P + 3 + 4);
  EXPECT_EQ(bare_greedy(plain, prefix, 3),
            std::vector<int32_t>(sink.ids.begin() + 3, sink.ids.end()));
  // Nothing waits any more: a second turn injects nothing.
  ActingSink again;
  (void)engine.run_turn(greedy_turn({}, 2), again);
  EXPECT_EQ(takes, 1);
  EXPECT_TRUE(again.injections.empty());
}

TEST(BoundaryInjection, WhatDoesNotFitEndsTheTurnAndKeepsWaiting) {
  ThreadPool pool(2);
  const Fixture f = load_fixture(fixture_dir("e2b-mini"), pool);
  ASSERT_NE(f.model, nullptr);
  std::atomic<int64_t> ready{1};
  std::vector<int64_t> rooms;
  actors::EngineOptions o;
  o.max_positions = int64_t(f.prompt.size()) + 10;
  o.boundary.ready = &ready;
  o.boundary.take = [&](std::vector<int32_t>&, int64_t room) {
    rooms.push_back(room);
    return actors::Injection::kNoRoom;
  };
  actors::Engine engine(std::make_shared<CpuForward>(*f.model, pool, o.max_positions), o);
  ActingSink sink;
  const actors::TurnOutcome out = engine.run_turn(greedy_turn(f.prompt, 5), sink);
  EXPECT_EQ(out.reason, actors::StopReason::kContextFull);
  EXPECT_EQ(out.generated, 0);
  ASSERT_EQ(rooms.size(), 1u);
  EXPECT_EQ(rooms[0], 9);  // one position stays for the next token
  EXPECT_EQ(ready.load(), 1);
}

TEST(BoundaryInjection, IdsOutsideTheVocabularyEndTheTurnWithAnError) {
  ThreadPool pool(2);
  const Fixture f = load_fixture(fixture_dir("e2b-mini"), pool);
  ASSERT_NE(f.model, nullptr);
  std::atomic<int64_t> ready{1};
  actors::EngineOptions o;
  o.max_positions = kMaxPositions;
  o.boundary.ready = &ready;
  o.boundary.take = [&](std::vector<int32_t>& ids, int64_t) {
    ids = {1, -3};
    ready.store(0);
    return actors::Injection::kIds;
  };
  actors::Engine engine(std::make_shared<CpuForward>(*f.model, pool, kMaxPositions), o);
  ActingSink sink;
  const actors::TurnOutcome out = engine.run_turn(greedy_turn(f.prompt, 3), sink);
  EXPECT_EQ(out.reason, actors::StopReason::kError);
  ASSERT_TRUE(out.error.has_value());
  EXPECT_NE(out.error->message.find("-3"), std::string::npos);
  EXPECT_EQ(engine.position(), int64_t(f.prompt.size()));  // nothing of it was added
}

// The real thing: a PTY's text acked while the model writes arrives as a tool response block,
// exactly the ids encode_pieces gives, once, and the interrupt's events say so.
TEST(InterruptInjection, AnAckedInterruptIsInjectedAsAToolResponseAtTheNextBoundary) {
  ThreadPool pool(2);
  const VocabModel f = load_vocab_model(pool);
  ASSERT_NE(f.model, nullptr);
  ASSERT_TRUE(f.tok.has_value());
  const Tokenizer* tok = &*f.tok;
  tools::InterruptSet interrupts;
  const tools::InterruptId id =
      *interrupts.raise({tools::SourceKind::kPty, 3}, "$ make\nerror: <tool_response|> x\n", "$ ");
  actors::EngineOptions o;
  o.max_positions = kMaxPositions;
  o.boundary = actors::interrupt_injection(interrupts, *tok);
  actors::Engine engine(std::make_shared<CpuForward>(*f.model, pool, kMaxPositions), o);
  ActingSink sink;
  sink.at = 1;
  sink.act = [&] { ASSERT_TRUE(interrupts.ack(id).ok()); };
  const actors::TurnOutcome out = engine.run_turn(greedy_turn(f.prompt, 4), sink);
  ASSERT_EQ(out.reason, actors::StopReason::kTokenLimit);
  // What was expected: the response block for this interrupt, by encode_pieces.
  tools::AckedText acked{id, {tools::SourceKind::kPty, 3}, "$ make\nerror: <tool_response|> x\n$ "};
  const Result<FormatPieces> pieces = actors::interrupt_response_pieces(acked);
  ASSERT_TRUE(pieces.ok());
  EXPECT_EQ(pieces->str(),
            "<|tool_response>response:pty{id:3,interrupt:1,text:<|\"|>$ make\nerror: "
            "<tool_response|> x\n$ <|\"|>}<tool_response|>");
  const Result<std::vector<int32_t>> framed = encode_pieces(*tok, *pieces);
  ASSERT_TRUE(framed.ok());
  const int64_t P = int64_t(f.prompt.size());
  ASSERT_EQ(sink.injections.size(), 1u);
  EXPECT_EQ(sink.injections[0].second, int64_t(framed->size()));
  const std::vector<int32_t>& ctx = engine.context();
  ASSERT_GE(int64_t(ctx.size()), P + 2 + int64_t(framed->size()));
  EXPECT_EQ(std::vector<int32_t>(ctx.begin() + P + 2, ctx.begin() + P + 2 + framed->size()),
            *framed);
  // The text's "<tool_response|>" stayed text: the only end marker is the frame's last id.
  EXPECT_EQ(std::count(framed->begin(), framed->end(), 51), 1);
  EXPECT_EQ(framed->back(), 51);
  EXPECT_EQ(interrupts.acked_count(), 0);
  EXPECT_TRUE(interrupts.list().empty());
  const auto events = interrupts.take_events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].kind, tools::InterruptEventKind::kInjected);
  EXPECT_EQ(events[2].id, id);
}

// Several acked at once: one frame each, in the order they were acked, all at one boundary.
TEST(InterruptInjection, SeveralAckedInterruptsArriveInAckOrderAtOneBoundary) {
  ThreadPool pool(2);
  const VocabModel f = load_vocab_model(pool);
  ASSERT_NE(f.model, nullptr);
  ASSERT_TRUE(f.tok.has_value());
  tools::InterruptSet interrupts;
  const tools::InterruptId a = *interrupts.raise({tools::SourceKind::kPty, 1}, "first pty\n");
  const tools::InterruptId b = *interrupts.raise({tools::SourceKind::kSubshell, 2}, "[exit 0]");
  actors::EngineOptions o;
  o.max_positions = kMaxPositions;
  o.boundary = actors::interrupt_injection(interrupts, *f.tok);
  actors::Engine engine(std::make_shared<CpuForward>(*f.model, pool, kMaxPositions), o);
  ActingSink sink;
  sink.at = 0;
  sink.act = [&] {
    ASSERT_TRUE(interrupts.ack(b).ok());
    ASSERT_TRUE(interrupts.ack(a).ok());
  };
  ASSERT_EQ(engine.run_turn(greedy_turn(f.prompt, 3), sink).reason,
            actors::StopReason::kTokenLimit);
  std::vector<int32_t> expect;
  for (const tools::AckedText& t :
       {tools::AckedText{b, {tools::SourceKind::kSubshell, 2}, "[exit 0]"},
        tools::AckedText{a, {tools::SourceKind::kPty, 1}, "first pty\n"}}) {
    const Result<FormatPieces> pieces = actors::interrupt_response_pieces(t);
    ASSERT_TRUE(pieces.ok());
    const Result<std::vector<int32_t>> ids = encode_pieces(*f.tok, *pieces);
    ASSERT_TRUE(ids.ok());
    expect.insert(expect.end(), ids->begin(), ids->end());
  }
  ASSERT_EQ(sink.injections.size(), 1u);
  const size_t at = f.prompt.size() + 1;
  const std::vector<int32_t>& ctx = engine.context();
  ASSERT_GE(ctx.size(), at + expect.size());
  EXPECT_EQ(std::vector<int32_t>(ctx.begin() + ptrdiff_t(at),
                                 ctx.begin() + ptrdiff_t(at + expect.size())),
            expect);
  EXPECT_NE(f.tok->decode(expect).find("response:subshell{id:2,"), std::string::npos);
}

TEST(InterruptInjection, AFrameThatCannotFitStaysAckedAndTheTurnEnds) {
  ThreadPool pool(2);
  const VocabModel f = load_vocab_model(pool);
  ASSERT_NE(f.model, nullptr);
  ASSERT_TRUE(f.tok.has_value());
  const Tokenizer* tok = &*f.tok;
  tools::InterruptSet interrupts;
  const tools::InterruptId id = *interrupts.raise({tools::SourceKind::kPty, 1}, "hello\n");
  ASSERT_TRUE(interrupts.ack(id).ok());
  actors::EngineOptions o;
  // Room for the prompt and a few tokens: less than the text's 6 bytes + kInterruptFrameIds.
  o.max_positions = int64_t(f.prompt.size()) + actors::kInterruptFrameIds;
  o.boundary = actors::interrupt_injection(interrupts, *tok);
  actors::Engine engine(std::make_shared<CpuForward>(*f.model, pool, o.max_positions), o);
  ActingSink sink;
  const actors::TurnOutcome out = engine.run_turn(greedy_turn(f.prompt, 4), sink);
  EXPECT_EQ(out.reason, actors::StopReason::kContextFull);
  EXPECT_EQ(interrupts.acked_count(), 1);  // still waiting, not lost
  EXPECT_EQ(*interrupts.text(id), "hello\n");
}

// Through the actor pipeline (the stream actor builds its Engine from PipelineOptions::engine):
// ids waiting at a turn's first boundary join it, and pending interrupts make the gate act.
TEST(InterruptPipeline, InjectionAndTheGatesUrgencyWorkThroughTheActors) {
  ThreadPool pool(2);
  const Fixture f = load_fixture(fixture_dir("e2b-mini"), pool);
  ASSERT_NE(f.model, nullptr);
  const std::vector<int32_t> extra = {5, 6, 7};
  std::atomic<int64_t> ready{1}, pending{0};
  actors::PipelineOptions o;
  o.engine.max_positions = kMaxPositions;
  o.engine.boundary.ready = &ready;
  o.engine.boundary.take = [&](std::vector<int32_t>& ids, int64_t) {
    ids.assign(extra.begin(), extra.end());
    ready.store(0);
    return actors::Injection::kIds;
  };
  o.gate.pending_interrupts = &pending;
  o.gate.act_on_interrupts = 1;
  RecordingFrontEnd front;
  actors::Pipeline p(std::make_shared<CpuForward>(*f.model, pool, kMaxPositions), o, front);
  const uint64_t t1 = p.send("", f.prompt, true, 4);
  const auto end1 = front.wait_turn(t1);
  ASSERT_TRUE(end1.has_value());
  EXPECT_EQ(end1->reason, actors::StopReason::kTokenLimit);
  const Result<actors::PipelineStats> st = p.stats(true);
  ASSERT_TRUE(st.ok());
  std::vector<int32_t> expect(f.prompt);
  expect.insert(expect.end(), extra.begin(), extra.end());
  const std::vector<int32_t> generated = front.ids(t1);
  expect.insert(expect.end(), generated.begin(), generated.end());
  EXPECT_EQ(st->context, expect);
  // The injected ids reach the front end as tokens of the turn, marked, at their positions.
  std::vector<int32_t> inserted;
  for (const actors::TokenEvent& t : front.all_tokens(t1)) {
    if (!t.inserted()) continue;
    EXPECT_EQ(t.origin, actors::TokenOrigin::kInterrupt);
    EXPECT_EQ(t.position, int64_t(f.prompt.size() + inserted.size()));
    inserted.push_back(t.id);
  }
  EXPECT_EQ(inserted, extra);
  // An interrupt pending: the gate acts and the turn stops within its lead.
  pending.store(1);
  const uint64_t t2 = p.send("", {}, true, 64);
  const auto end2 = front.wait_turn(t2);
  ASSERT_TRUE(end2.has_value());
  EXPECT_EQ(end2->reason, actors::StopReason::kGate);
  EXPECT_LE(end2->generated, actors::kGateLead + 1);
  const auto tokens = front.tokens(t2);
  ASSERT_FALSE(tokens.empty());
  EXPECT_EQ(tokens.front().decision, actors::Decision::kAct);
}

}  // namespace
}  // namespace infer::test
