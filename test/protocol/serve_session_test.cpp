// The --serve session's state machine (protocol/serve_session.h) without a process or a model:
// client frames and engine events in, frames and commands out (PROTOCOL.md §6.3, §7, §8).
#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include "protocol/encode.h"
#include "protocol/serve_session.h"

namespace infer::protocol {
namespace {

// Drives a ServeSession: each call's frames and commands are kept until taken.
class Driver {
 public:
  Driver() : session_(hello(), /*default_max_tokens=*/7, [this] { return now_ns_; }) {}

  static ServerHello hello() {
    ServerHello h;
    h.vocab_size = 100;
    h.max_generate_tokens = 50;
    h.context_tokens = 64;
    h.end_ids = {1};
    return h;
  }

  void send(uint32_t rid, const ClientMessage& m) {
    std::vector<uint8_t> bytes;
    encode(m, rid, bytes);
    session_.feed(bytes, out_);
  }
  void handshake() {
    send(1, Hello{});
    ASSERT_EQ(take_frames().size(), 1u);
  }
  void token(uint64_t turn, uint32_t id, uint64_t pos, GateDecision d = GateDecision::kSpeak) {
    EngineToken t;
    t.turn = turn;
    t.id = id;
    t.pos = pos;
    t.decision = d;
    session_.token(t, out_);
  }
  void turn_end(uint64_t turn, uint64_t pos, DoneReason reason = DoneReason::kLimit) {
    EngineTurnEnd e;
    e.turn = turn;
    e.pos = pos;
    e.reason = reason;
    session_.turn_end(e, out_);
  }
  void reset_done() { session_.reset_done(out_); }
  void appended(uint64_t turn, uint64_t pos, uint32_t n) {
    session_.appended(EngineAppended{turn, pos, n}, out_);
  }

  std::vector<Outgoing> take_frames() {
    std::vector<Outgoing> f;
    f.swap(out_.frames);
    return f;
  }
  std::vector<EngineCommand> take_commands() {
    std::vector<EngineCommand> c;
    c.swap(out_.commands);
    return c;
  }
  // The opcodes of the frames written since the last take, in order, with their request ids.
  std::vector<std::pair<Opcode, uint32_t>> take_opcodes() {
    std::vector<std::pair<Opcode, uint32_t>> ops;
    for (const Outgoing& f : take_frames()) ops.emplace_back(opcode_of(f.message), f.request_id);
    return ops;
  }

  ServeSession& session() { return session_; }
  SessionOutput& out() { return out_; }
  int64_t now_ns_ = 0;

 private:
  ServeSession session_;
  SessionOutput out_;
};

template <class T>
const T& only(const std::vector<Outgoing>& frames) {
  EXPECT_EQ(frames.size(), 1u);
  return std::get<T>(frames.at(0).message);
}

template <class T>
std::vector<T> commands_of(const std::vector<EngineCommand>& cs) {
  std::vector<T> out;
  for (const EngineCommand& c : cs) {
    if (const auto* x = std::get_if<T>(&c)) out.push_back(*x);
  }
  return out;
}

Generate generate(uint32_t max_tokens, uint32_t flags = kGenStopAtEot) {
  Generate g;
  g.max_tokens = max_tokens;
  g.flags = flags;
  return g;
}

TEST(ServeSession, HelloIsAnsweredAtOnceAndAnAppendWhenItsTurnEnds) {
  Driver d;
  d.send(1, Hello{});
  EXPECT_EQ(only<ServerHello>(d.take_frames()), Driver::hello());
  d.send(2, AppendIds{{5, 6, 7}});
  EXPECT_TRUE(d.take_frames().empty());
  const auto cmds = d.take_commands();
  ASSERT_EQ(cmds.size(), 1u);
  const auto& a = std::get<AppendCommand>(cmds[0]);
  EXPECT_EQ(a.turn, 1u);
  EXPECT_EQ(a.ids, (std::vector<int32_t>{5, 6, 7}));
  d.turn_end(1, 3);
  const auto frames = d.take_frames();
  EXPECT_EQ(only<Appended>(frames), (Appended{3, 3}));
  EXPECT_EQ(frames[0].request_id, 2u);
}

TEST(ServeSession, AGenerationBecomesTokensGatesAndOneDone) {
  Driver d;
  d.handshake();
  d.send(2, AppendIds{{5, 6}});
  d.turn_end(1, 2);
  d.take_frames();
  d.take_commands();
  Generate g = generate(0, kGenStopAtEot | kGenGated);
  g.temperature = 0.5f;
  g.seed = 9;
  g.stop_ids = {42};
  d.send(3, g);
  const auto gens = commands_of<GenerateCommand>(d.take_commands());
  ASSERT_EQ(gens.size(), 1u);
  EXPECT_EQ(gens[0].turn, 2u);
  EXPECT_EQ(gens[0].max_tokens, 7);  // 0: the server's -n
  EXPECT_TRUE(gens[0].own_sampling);
  EXPECT_EQ(gens[0].temperature, 0.5f);
  EXPECT_EQ(gens[0].seed, 9u);
  EXPECT_TRUE(gens[0].stop_at_eot);
  EXPECT_TRUE(gens[0].gated);
  EXPECT_EQ(gens[0].stop_ids, std::vector<int32_t>{42});
  EXPECT_TRUE(d.session().generating());

  d.token(2, 11, 2);
  d.token(2, 12, 3, GateDecision::kStopAndListen);  // not speak: a GATE frame follows
  d.turn_end(2, 4, DoneReason::kGate);
  const auto frames = d.take_frames();
  ASSERT_EQ(frames.size(), 4u);
  EXPECT_EQ(std::get<Token>(frames[0].message), (Token{11, 0, 2, ""}));
  EXPECT_EQ(std::get<Token>(frames[1].message), (Token{12, 1, 3, ""}));
  EXPECT_EQ(std::get<Gate>(frames[2].message).index, 1u);
  const Done& done = std::get<Done>(frames[3].message);
  EXPECT_EQ(done.reason, DoneReason::kGate);
  EXPECT_EQ(done.n_tokens, 2u);
  EXPECT_EQ(done.pos, 4u);
  EXPECT_EQ(done.last_id, 12u);
  for (const Outgoing& f : frames) EXPECT_EQ(f.request_id, 3u);
  EXPECT_FALSE(d.session().generating());
  // A second generation is accepted after DONE.
  d.send(4, generate(2));
  EXPECT_EQ(commands_of<GenerateCommand>(d.take_commands()).size(), 1u);
}

TEST(ServeSession, AppendsWhileGeneratingWaitForDoneAndStatsIsAnsweredAtOnce) {
  Driver d;
  d.handshake();
  d.send(2, AppendIds{{5}});
  d.turn_end(1, 1);
  d.send(3, generate(10));
  d.take_frames();
  d.take_commands();
  d.token(2, 11, 1);
  d.send(4, AppendIds{{7, 8}});
  d.send(5, AppendText{""});
  EXPECT_TRUE(d.take_commands().empty());  // queued
  d.send(6, StatsRequest{});
  auto frames = d.take_frames();
  ASSERT_EQ(frames.size(), 2u);  // the TOKEN, then STATS at once
  const Stats& st = std::get<Stats>(frames[1].message);
  EXPECT_EQ(st.flags, kStatsGenerating);
  EXPECT_EQ(st.queued_appends, 2u);
  EXPECT_EQ(st.pos, 2u);
  d.token(2, 12, 2);
  d.turn_end(2, 3);
  EXPECT_EQ(d.take_opcodes(), (std::vector<std::pair<Opcode, uint32_t>>{{Opcode::kToken, 3},
                                                                         {Opcode::kDone, 3}}));
  // After DONE the queued appends go to the engine, in order.
  const auto appends = commands_of<AppendCommand>(d.take_commands());
  ASSERT_EQ(appends.size(), 2u);
  EXPECT_EQ(appends[0].turn, 3u);
  EXPECT_EQ(appends[0].ids, (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(appends[1].turn, 4u);
  // STATS while idle waits for the APPENDEDs before it.
  d.send(7, StatsRequest{});
  EXPECT_TRUE(d.take_frames().empty());
  d.turn_end(3, 5);
  EXPECT_EQ(only<Appended>(d.take_frames()), (Appended{5, 2}));
  d.turn_end(4, 5);
  frames = d.take_frames();
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(std::get<Appended>(frames[0].message), (Appended{5, 0}));
  EXPECT_EQ(std::get<Stats>(frames[1].message).pos, 5u);
  EXPECT_EQ(frames[1].request_id, 7u);
}

TEST(ServeSession, AfterAnInterruptEveryTokenInTheContextGoesOutThenDone) {
  Driver d;
  d.handshake();
  d.send(2, AppendIds{{5}});
  d.turn_end(1, 1);
  d.send(3, generate(10));
  d.take_frames();
  d.take_commands();
  d.token(2, 11, 1);
  d.send(4, Interrupt{});
  d.send(5, Interrupt{});  // one command for both
  EXPECT_EQ(commands_of<InterruptCommand>(d.take_commands()).size(), 1u);
  d.token(2, 12, 2);
  d.token(2, 13, 3);  // in flight when the interrupt landed: in the context, so sent too
  d.turn_end(2, 4, DoneReason::kInterrupted);
  const auto frames = d.take_frames();
  ASSERT_EQ(frames.size(), 4u);
  EXPECT_EQ(std::get<Token>(frames[2].message).pos, 3u);
  const Done& done = std::get<Done>(frames[3].message);
  EXPECT_EQ(done.reason, DoneReason::kInterrupted);
  EXPECT_EQ(done.n_tokens, 3u);
  EXPECT_EQ(done.last_id, 13u);
  EXPECT_EQ(done.pos, 4u);  // the last TOKEN's pos + 1
  d.send(6, Interrupt{});  // idle: ignored, no answer
  EXPECT_TRUE(d.take_frames().empty());
  EXPECT_TRUE(d.take_commands().empty());
}

TEST(ServeSession, ResetWhileGeneratingAnswersDoneThenAppendedThenResetAck) {
  Driver d;
  d.handshake();
  d.send(2, AppendIds{{5}});
  d.turn_end(1, 1);
  d.send(3, generate(10));
  d.take_frames();
  d.take_commands();
  d.send(4, AppendIds{{6}});
  d.send(5, Reset{});
  const auto cmds = d.take_commands();
  ASSERT_EQ(cmds.size(), 3u);
  EXPECT_TRUE(std::holds_alternative<InterruptCommand>(cmds[0]));
  EXPECT_EQ(std::get<AppendCommand>(cmds[1]).turn, 3u);
  EXPECT_TRUE(std::holds_alternative<ResetCommand>(cmds[2]));
  d.send(6, StatsRequest{});  // after the answers to the frames before it: APPENDED, RESET_ACK
  EXPECT_TRUE(d.take_frames().empty());
  d.turn_end(2, 2, DoneReason::kInterrupted);
  d.turn_end(3, 3);
  d.send(7, StatsRequest{});
  d.reset_done();
  const auto frames = d.take_frames();
  std::vector<std::pair<Opcode, uint32_t>> ops;
  for (const Outgoing& f : frames) ops.emplace_back(opcode_of(f.message), f.request_id);
  EXPECT_EQ(ops, (std::vector<std::pair<Opcode, uint32_t>>{{Opcode::kDone, 3},
                                                           {Opcode::kAppended, 4},
                                                           {Opcode::kResetAck, 5},
                                                           {Opcode::kStats, 6},
                                                           {Opcode::kStats, 7}}));
  EXPECT_EQ(std::get<Stats>(frames[3].message).pos, 0u);  // counted after the reset
}

TEST(ServeSession, ShutdownWhileGeneratingEndsAfterDoneWithShutdownAck) {
  Driver d;
  d.handshake();
  d.send(2, AppendIds{{5}});
  d.turn_end(1, 1);
  d.send(3, generate(10));
  d.take_frames();
  d.take_commands();
  d.send(4, AppendIds{{6}});  // queued, then dropped by the shutdown
  d.send(5, Shutdown{});
  EXPECT_TRUE(d.session().reading_done());
  EXPECT_FALSE(d.session().finished());
  const auto cmds = d.take_commands();
  ASSERT_EQ(cmds.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<InterruptCommand>(cmds[0]));
  d.send(6, StatsRequest{});  // not read after SHUTDOWN
  EXPECT_TRUE(d.take_frames().empty());
  d.turn_end(2, 2, DoneReason::kInterrupted);
  EXPECT_EQ(d.take_opcodes(), (std::vector<std::pair<Opcode, uint32_t>>{{Opcode::kDone, 3},
                                                                         {Opcode::kShutdownAck, 5}}));
  EXPECT_TRUE(d.take_commands().empty());  // the queued append was dropped
  EXPECT_TRUE(d.session().finished());
  EXPECT_EQ(d.session().exit_status(), 0);
  d.token(2, 9, 3);  // nothing is written after the last frame
  EXPECT_TRUE(d.take_frames().empty());
}

TEST(ServeSession, EndOfInputInsideAFrameIsTruncatedAndEndsWithoutAck) {
  Driver d;
  d.handshake();
  std::vector<uint8_t> bytes;
  encode(ClientMessage{AppendIds{{1, 2}}}, 9, bytes);
  bytes.resize(bytes.size() - 3);
  d.session().feed(bytes, d.out());
  d.session().end_of_input(d.out());
  const auto frames = d.take_frames();
  const ErrorFrame& e = only<ErrorFrame>(frames);
  EXPECT_EQ(e.code, WireError::kTruncated);
  EXPECT_EQ(frames[0].request_id, 0u);
  EXPECT_TRUE(d.session().finished());
  EXPECT_EQ(d.session().exit_status(), 0);
}

TEST(ServeSession, AnEndOfInputWaitsForTheAppendsAlreadySent) {
  Driver d;
  d.handshake();
  d.send(2, AppendIds{{5}});
  d.session().end_of_input(d.out());
  EXPECT_FALSE(d.session().finished());
  d.turn_end(1, 1);
  EXPECT_EQ(d.take_opcodes(), (std::vector<std::pair<Opcode, uint32_t>>{{Opcode::kAppended, 2}}));
  EXPECT_TRUE(d.session().finished());
}

TEST(ServeSession, AVersionMismatchEndsWithShutdownAckAndStatus1) {
  Driver d;
  d.send(7, Hello{2, ""});
  d.send(8, StatsRequest{});
  const auto frames = d.take_frames();
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(std::get<ErrorFrame>(frames[0].message).code, WireError::kVersionMismatch);
  EXPECT_EQ(frames[0].request_id, 7u);
  EXPECT_TRUE(std::holds_alternative<ShutdownAck>(frames[1].message));
  EXPECT_TRUE(d.session().finished());
  EXPECT_EQ(d.session().exit_status(), 1);
}

TEST(ServeSession, AClosedOutputInterruptsAndEndsTheSession) {
  Driver d;
  d.handshake();
  d.send(2, AppendIds{{5}});
  d.turn_end(1, 1);
  d.send(3, generate(10));
  d.take_frames();
  d.take_commands();
  d.session().output_closed(d.out());
  EXPECT_TRUE(d.session().reading_done());
  EXPECT_EQ(commands_of<InterruptCommand>(d.take_commands()).size(), 1u);
  d.token(2, 11, 1);
  d.turn_end(2, 2, DoneReason::kInterrupted);
  EXPECT_TRUE(d.take_frames().empty());
  EXPECT_TRUE(d.session().finished());
}

TEST(ServeSession, TraceMarksAreAnsweredWithTheServerClock) {
  Driver d;
  d.handshake();
  d.now_ns_ = 1500;
  d.send(4, TraceMark{"here"});
  EXPECT_EQ(only<TraceMarkAck>(d.take_frames()), (TraceMarkAck{1500, "here"}));
  const auto marks = commands_of<TraceMarkCommand>(d.take_commands());
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_EQ(marks[0].label, "here");
}

// §8: answers go out in the order their frames came, and APPENDED as soon as the tokens are in
// the context, before their prefill (the turn's end).
TEST(ServeSession, AnswersKeepTheFramesOrderAndAppendedDoesNotWaitForPrefill) {
  Driver d;
  d.handshake();
  d.send(2, AppendIds{{5, 6, 7}});
  d.send(3, StatsRequest{});
  d.send(4, TraceMark{"m"});
  d.send(5, AppendIds{{100}});  // rejected: outside the vocabulary
  d.send(6, StatsRequest{});
  EXPECT_TRUE(d.take_frames().empty());  // all wait for the APPENDED before them
  d.appended(1, 3, 3);
  const auto frames = d.take_frames();
  EXPECT_EQ(d.take_opcodes(), (std::vector<std::pair<Opcode, uint32_t>>{}));
  ASSERT_EQ(frames.size(), 5u);
  EXPECT_EQ(std::get<Appended>(frames[0].message), (Appended{3, 3}));
  EXPECT_EQ(std::get<Stats>(frames[1].message).pos, 3u);
  EXPECT_EQ(std::get<TraceMarkAck>(frames[2].message).label, "m");
  EXPECT_EQ(std::get<ErrorFrame>(frames[3].message).code, WireError::kIdOutOfRange);
  EXPECT_EQ(frames[4].request_id, 6u);
  d.turn_end(1, 3);  // the prefill is done: nothing more to answer
  EXPECT_TRUE(d.take_frames().empty());
  d.send(7, TraceMark{"idle"});  // nothing waits: at once
  EXPECT_EQ(only<TraceMarkAck>(d.take_frames()).label, "idle");
}

// A fixed cache that refuses an append whole: its ERROR carries the frame's request id and opcode
// in place of APPENDED, and a GENERATE sent before the refusal was known gets BAD_VALUE, no DONE.
TEST(ServeSession, ARefusedAppendIsAnErrorOfItsFrameAndLeavesTheContextEmpty) {
  Driver d;
  d.handshake();
  d.send(2, AppendIds{{5, 6, 7}});
  d.send(3, generate(4));  // pipelined behind it: the reader thinks the context has tokens
  EXPECT_EQ(d.take_commands().size(), 2u);
  d.session().engine_error(EngineError{EngineError::kContextFull, "the context would hold 3"},
                           d.out());
  EXPECT_TRUE(d.take_frames().empty());  // held for the turn it belongs to
  d.turn_end(1, 0);
  const auto refused = d.take_frames();
  const ErrorFrame& e = only<ErrorFrame>(refused);
  EXPECT_EQ(e.code, WireError::kContextFull);
  EXPECT_EQ(e.opcode, uint16_t(Opcode::kAppendIds));
  EXPECT_EQ(refused[0].request_id, 2u);
  d.session().engine_error(EngineError{EngineError::kEmptyContext, "the context is empty"},
                           d.out());
  d.turn_end(2, 0, DoneReason::kError);
  const auto gen = d.take_frames();
  const ErrorFrame& g = only<ErrorFrame>(gen);  // no DONE
  EXPECT_EQ(g.code, WireError::kBadValue);
  EXPECT_EQ(g.opcode, uint16_t(Opcode::kGenerate));
  EXPECT_EQ(gen[0].request_id, 3u);
  d.send(4, generate(4));  // now known at once: the context is empty
  EXPECT_EQ(only<ErrorFrame>(d.take_frames()).code, WireError::kBadValue);
  EXPECT_TRUE(d.take_commands().empty());
}

// An engine failure during a generation: ERROR ENGINE for its request, then DONE `error`.
TEST(ServeSession, AnEngineFailureDuringAGenerationIsAnErrorThenDone) {
  Driver d;
  d.handshake();
  d.send(2, AppendIds{{5}});
  d.turn_end(1, 1);
  d.send(3, generate(4));
  d.take_frames();
  d.take_commands();
  d.token(2, 11, 1);
  d.session().engine_error(EngineError{EngineError::kEngine, "device lost"}, d.out());
  d.turn_end(2, 2, DoneReason::kError);
  const auto frames = d.take_frames();
  ASSERT_EQ(frames.size(), 3u);
  const ErrorFrame& e = std::get<ErrorFrame>(frames[1].message);
  EXPECT_EQ(e.code, WireError::kEngine);
  EXPECT_EQ(frames[1].request_id, 3u);
  EXPECT_EQ(e.opcode, uint16_t(Opcode::kGenerate));
  const Done& done = std::get<Done>(frames[2].message);
  EXPECT_EQ(done.reason, DoneReason::kError);
  EXPECT_EQ(done.pos, 2u);
}

TEST(ServeSession, RejectedFramesAreAnsweredWithErrorsAndChangeNothing) {
  Driver d;
  d.send(3, AppendIds{{1}});  // before HELLO
  EXPECT_EQ(only<ErrorFrame>(d.take_frames()).code, WireError::kOutOfOrder);
  d.handshake();
  d.send(4, generate(2));  // empty context
  EXPECT_EQ(only<ErrorFrame>(d.take_frames()).code, WireError::kBadValue);
  d.send(5, AppendIds{{1, 100}});  // outside the vocabulary
  EXPECT_EQ(only<ErrorFrame>(d.take_frames()).code, WireError::kIdOutOfRange);
  EXPECT_TRUE(d.take_commands().empty());
}

}  // namespace
}  // namespace infer::protocol
