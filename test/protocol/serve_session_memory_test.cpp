// ServeSession's episodic memory frames (PROTOCOL.md §4.14-§4.19): NOT_AVAILABLE without
// --memory, requests as MemoryCommands whose answers keep the frames' order, queued behind a
// generation until its DONE, MEMORY_EVENTs named by their cause while watching, and SHUTDOWN
// waiting for the episodes being written.
#include <gtest/gtest.h>

#include "test/protocol/serve_session_driver.h"

namespace infer::protocol::serve_test {
namespace {

using Ops = std::vector<std::pair<Opcode, uint32_t>>;

void reply(Driver& d, uint64_t ticket, ServerMessage answer, int64_t pos = -1,
           uint64_t prefilled = 0) {
  d.session().memory_reply(EngineMemoryReply{ticket, std::move(answer), pos, prefilled, 1.0},
                           d.out());
}

void event(Driver& d, MemoryEventKind kind, uint64_t ticket, uint64_t turn) {
  EngineMemoryEvent e;
  e.event.kind = kind;
  e.event.episode_id = 5;
  e.cause_ticket = ticket;
  e.cause_turn = turn;
  d.session().memory_event(e, d.out());
}

TEST(ServeSessionMemory, WithoutMemoryEveryFrameOfTheRangeIsNotAvailable) {
  Driver d;
  d.handshake();
  const std::vector<ClientMessage> frames = {MemoryRecall{"x"}, MemoryStore{}, MemoryForget{1},
                                             MemoryQuery{0, 10}, MemoryWatch{1}};
  uint32_t rid = 10;
  for (const ClientMessage& m : frames) {
    d.send(rid, m);
    const auto out = d.take_frames();
    const auto& e = only<ErrorFrame>(out);
    EXPECT_EQ(e.code, WireError::kNotAvailable) << e.message;
    EXPECT_EQ(e.opcode, uint16_t(opcode_of(m)));
    EXPECT_EQ(out.at(0).request_id, rid);
    EXPECT_NE(e.message.find("--memory"), std::string::npos) << e.message;
    ++rid;
  }
  EXPECT_TRUE(d.take_commands().empty());
  d.send(20, StatsRequest{});  // the session goes on
  EXPECT_EQ(d.take_opcodes(), (Ops{{Opcode::kStats, 20}}));
}

TEST(ServeSessionMemory, RequestsBecomeCommandsAndAnswersKeepTheFramesOrder) {
  Driver d;
  d.session().set_memory(true);
  d.handshake();
  d.send(10, MemoryQuery{2, 5});
  d.send(11, AppendIds{{7, 8}});
  d.send(12, MemoryStore{});
  d.send(13, MemoryForget{99});
  const auto cmds = d.take_commands();
  ASSERT_EQ(cmds.size(), 4u);
  const auto mem = commands_of<MemoryCommand>(cmds);
  ASSERT_EQ(mem.size(), 3u);
  EXPECT_EQ(mem[0].kind, MemoryCommand::kQuery);
  EXPECT_EQ(mem[0].first, 2u);
  EXPECT_EQ(mem[0].max_count, 5u);
  EXPECT_EQ(mem[1].kind, MemoryCommand::kStore);
  EXPECT_EQ(mem[2].kind, MemoryCommand::kForget);
  EXPECT_EQ(mem[2].episode_id, 99u);
  EXPECT_NE(mem[0].ticket, mem[1].ticket);
  EXPECT_EQ(std::get<AppendCommand>(cmds[1]).turn, 1u);  // tickets do not use turn numbers
  // The engine answers out of order; the frames go out in request order.
  reply(d, mem[2].ticket, ErrorFrame{WireError::kBadValue, 0x0102, "no episode 99"});
  reply(d, mem[1].ticket, MemoryStored{{{4, 0, 2}}});
  EXPECT_TRUE(d.take_frames().empty());
  reply(d, mem[0].ticket, MemoryList{3, {}});
  EXPECT_EQ(d.take_opcodes(), (Ops{{Opcode::kMemoryList, 10}}));
  d.appended(1, 2, 2);
  const auto frames = d.take_frames();
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(opcode_of(frames[0].message), Opcode::kAppended);
  EXPECT_EQ(std::get<MemoryStored>(frames[1].message).episodes.at(0).episode_id, 4u);
  EXPECT_EQ(frames[1].request_id, 12u);
  EXPECT_EQ(std::get<ErrorFrame>(frames[2].message).code, WireError::kBadValue);
  EXPECT_EQ(frames[2].request_id, 13u);
}

TEST(ServeSessionMemory, DuringAGenerationMemoryFramesWaitForItsDoneInOrder) {
  Driver d;
  d.session().set_memory(true);
  d.start_generating(10);
  d.send(4, MemoryRecall{"the river"});
  d.send(5, AppendIds{{9}});
  d.send(6, MemoryWatch{1});
  d.send(7, StatsRequest{});  // answered at once: one queued append, memory frames not counted
  EXPECT_TRUE(d.take_commands().empty());
  const auto stats = d.take_frames();
  EXPECT_EQ(only<Stats>(stats).queued_appends, 1u);
  EXPECT_FALSE(d.session().watching());
  d.token(2, 11, 1);
  d.turn_end(2, 2);
  EXPECT_EQ(d.take_opcodes(), (Ops{{Opcode::kToken, 3}, {Opcode::kDone, 3}}));
  const auto cmds = d.take_commands();
  ASSERT_EQ(cmds.size(), 2u);  // the recall, then the append; the watch is the session's
  const auto& recall = std::get<MemoryCommand>(cmds[0]);
  EXPECT_EQ(recall.kind, MemoryCommand::kRecall);
  EXPECT_EQ(recall.text, "the river");
  EXPECT_TRUE(d.session().watching());
  // The recall's query joined the context: STATS pos follows its answer.
  reply(d, recall.ticket, MemoryRecalled{{{8, 64, 0.9f, 0.85f, 2.0f, 1}}}, 5, 3);
  d.turn_end(std::get<AppendCommand>(cmds[1]).turn, 6);
  d.send(8, StatsRequest{});
  const auto frames = d.take_frames();
  ASSERT_EQ(frames.size(), 4u);
  EXPECT_EQ(opcode_of(frames[0].message), Opcode::kMemoryRecalled);
  EXPECT_EQ(frames[0].request_id, 4u);
  EXPECT_EQ(opcode_of(frames[1].message), Opcode::kAppended);
  EXPECT_EQ(opcode_of(frames[2].message), Opcode::kMemoryWatchAck);
  EXPECT_EQ(frames[2].request_id, 6u);
  EXPECT_EQ(std::get<Stats>(frames[3].message).pos, 6u);
  EXPECT_EQ(std::get<Stats>(frames[3].message).prefill_tokens, 3u);  // the query's (turn ends: 0)
}

TEST(ServeSessionMemory, EventsGoOutWhileWatchingNamedByTheFrameThatCausedThem) {
  Driver d;
  d.session().set_memory(true);
  d.handshake();
  event(d, MemoryEventKind::kStored, 0, 0);  // not watching: nothing
  EXPECT_TRUE(d.take_frames().empty());
  d.send(2, MemoryWatch{1});
  EXPECT_EQ(d.take_opcodes(), (Ops{{Opcode::kMemoryWatchAck, 2}}));
  d.send(3, MemoryForget{5});
  const uint64_t ticket = commands_of<MemoryCommand>(d.take_commands()).at(0).ticket;
  event(d, MemoryEventKind::kForgotten, ticket, 0);
  event(d, MemoryEventKind::kStored, 0, 0);  // background consolidation
  const auto frames = d.take_frames();
  ASSERT_EQ(frames.size(), 2u);  // events do not wait for the answers before them
  EXPECT_EQ(std::get<MemoryEvent>(frames[0].message).kind, MemoryEventKind::kForgotten);
  EXPECT_EQ(frames[0].request_id, 3u);
  EXPECT_EQ(frames[1].request_id, 0u);
  reply(d, ticket, MemoryForgotten{5});
  EXPECT_EQ(d.take_opcodes(), (Ops{{Opcode::kMemoryForgotten, 3}}));
  // A generation's automatic recall names the GENERATE.
  d.send(4, AppendIds{{5}});
  d.turn_end(1, 1);
  d.send(9, generate(3));
  const uint64_t turn = commands_of<GenerateCommand>(d.take_commands()).at(0).turn;
  d.take_frames();
  event(d, MemoryEventKind::kRecalled, 0, turn);
  EXPECT_EQ(d.take_opcodes(), (Ops{{Opcode::kMemoryEvent, 9}}));
  d.turn_end(turn, 1);
  d.send(10, MemoryWatch{0});
  d.take_frames();
  event(d, MemoryEventKind::kStored, 0, 0);
  EXPECT_TRUE(d.take_frames().empty());
}

TEST(ServeSessionMemory, ShutdownWaitsForTheEpisodesBeingWritten) {
  Driver d;
  d.session().set_memory(true);
  d.handshake();
  d.send(2, Shutdown{});
  const auto drain = commands_of<MemoryCommand>(d.take_commands());
  ASSERT_EQ(drain.size(), 1u);
  EXPECT_EQ(drain[0].kind, MemoryCommand::kDrain);
  EXPECT_TRUE(d.take_frames().empty());
  EXPECT_FALSE(d.session().finished());
  reply(d, drain[0].ticket, MemoryWatchAck{});  // silent: only SHUTDOWN_ACK goes out
  EXPECT_EQ(d.take_opcodes(), (Ops{{Opcode::kShutdownAck, 2}}));
  EXPECT_TRUE(d.session().finished());
}

TEST(ServeSessionMemory, ResetMidGenerationSendsTheQueuedMemoryFramesBeforeTheReset) {
  Driver d;
  d.session().set_memory(true);
  d.start_generating(10);
  d.send(4, MemoryStore{});
  d.send(5, Reset{});
  const auto cmds = d.take_commands();
  ASSERT_EQ(cmds.size(), 3u);
  EXPECT_TRUE(std::holds_alternative<InterruptCommand>(cmds[0]));
  EXPECT_EQ(std::get<MemoryCommand>(cmds[1]).kind, MemoryCommand::kStore);
  EXPECT_TRUE(std::holds_alternative<ResetCommand>(cmds[2]));
  d.turn_end(2, 1, DoneReason::kInterrupted);
  reply(d, std::get<MemoryCommand>(cmds[1]).ticket, MemoryStored{});
  d.reset_done();
  EXPECT_EQ(d.take_opcodes(),
            (Ops{{Opcode::kDone, 3}, {Opcode::kMemoryStored, 4}, {Opcode::kResetAck, 5}}));
}

}  // namespace
}  // namespace infer::protocol::serve_test
