// The --serve session's state machine (protocol/serve_session.h) without a process or a model:
// client frames and engine events in, frames and commands out (PROTOCOL.md §6.3, §7, §8).
// serve_session_answers_test.cpp: answer order, refusals and engine errors.
#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include "protocol/encode.h"
#include "protocol/serve_session.h"
#include "test/protocol/serve_session_driver.h"

namespace infer::protocol {
namespace {

using serve_test::commands_of;
using serve_test::Driver;
using serve_test::generate;
using serve_test::only;

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

// §4.8's urgency: 0 with nothing waiting, 1 - 2^-n with n tool interrupts pending, 1 once
// client input is queued behind the generation, whatever the interrupts.
TEST(ServeSession, GateUrgencyCountsPendingInterruptsAndQueuedInput) {
  Driver d;
  d.start_generating(10);
  const auto gate_urgency = [&](uint32_t pending) {
    EngineToken t;
    t.turn = 2;
    t.id = 11;
    t.pos = 1;
    t.decision = GateDecision::kStopAndListen;  // a GATE frame follows
    t.pending_interrupts = pending;
    d.session().token(t, d.out());
    const auto frames = d.take_frames();
    EXPECT_EQ(frames.size(), 2u);
    return frames.size() == 2 ? std::get<Gate>(frames[1].message).urgency : -1.0f;
  };
  EXPECT_EQ(gate_urgency(0), 0.0f);
  EXPECT_EQ(gate_urgency(1), 0.5f);
  EXPECT_EQ(gate_urgency(2), 0.75f);
  EXPECT_EQ(gate_urgency(1000), 1.0f);
  d.send(4, AppendIds{{7}});  // queued behind the generation
  EXPECT_EQ(gate_urgency(0), 1.0f);
  EXPECT_EQ(gate_urgency(1), 1.0f);
}

TEST(ServeSession, AppendsWhileGeneratingWaitForDoneAndStatsIsAnsweredAtOnce) {
  Driver d;
  d.start_generating(10);
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
  d.start_generating(10);
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
  d.start_generating(10);
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
  d.start_generating(10);
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
  d.start_generating(10);
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

}  // namespace
}  // namespace infer::protocol
