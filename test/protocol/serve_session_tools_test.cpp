// ServeSession's tool frames (PROTOCOL.md §4.20-§4.29) against a fake ToolFrames: NOT_AVAILABLE
// without one, each frame to its virtual with its request id and answered in order, refusals as
// ERROR frames naming the frame, handled at once while generating, TOOL_CALL on its GENERATE's
// id and none after INTERRUPT, TOOL_EVENTs as the client's mask says, named by their cause.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test/protocol/samples.h"
#include "test/protocol/serve_session_driver.h"

namespace infer::protocol::serve_test {
namespace {

using Ops = std::vector<std::pair<Opcode, uint32_t>>;

// Records every call; refuses PTY 99 (BAD_VALUE) and call 77 (OUT_OF_ORDER), answers the rest.
class FakeTools : public ToolFrames {
 public:
  struct Call {
    std::string what;
    uint32_t rid;
    ClientMessage frame;
  };
  std::vector<Call> calls;

  ToolReply<ToolDeclared> declare(uint32_t rid, const ToolDeclare& d) override {
    log("declare", rid, d);
    const auto tools = parse_tool_declarations(d.json);
    return ToolDeclared{uint32_t(tools.ok() ? tools->size() : 0)};
  }
  ToolReply<ToolAck> result(uint32_t rid, const ToolResult& r) override {
    log("result", rid, r);
    if (r.call_id == 77) return ToolRefusal{WireError::kOutOfOrder, "call 77 was answered already"};
    return ToolAck{};
  }
  ToolReply<PtyOpened> pty_open(uint32_t rid, const PtyOpen& o) override {
    log("pty_open", rid, o);
    return PtyOpened{4, 1234};
  }
  ToolReply<ToolAck> pty_write(uint32_t rid, const PtyWrite& w) override {
    log("pty_write", rid, w);
    return ack_unless_99(w.pty_id);
  }
  ToolReply<ToolAck> pty_resize(uint32_t rid, const PtyResize& r) override {
    log("pty_resize", rid, r);
    return ack_unless_99(r.pty_id);
  }
  ToolReply<ToolAck> pty_close(uint32_t rid, const PtyClose& c) override {
    log("pty_close", rid, c);
    return ack_unless_99(c.pty_id);
  }
  ToolReply<PtyData> pty_read(uint32_t rid, const PtyRead& r) override {
    log("pty_read", rid, r);
    PtyData d;
    d.pty_id = r.pty_id;
    d.view = r.view;
    d.from = r.from;
    d.data = "out";
    d.next = d.end = r.from + 3;
    return d;
  }
  ToolReply<ToolAck> interrupt_action(uint32_t rid, const InterruptAction& a) override {
    log("interrupt_action", rid, a);
    return ToolAck{};
  }
  ToolReply<InterruptRaised> interrupt_raise(uint32_t rid, const InterruptRaise& r) override {
    log("interrupt_raise", rid, r);
    return InterruptRaised{r.channel + 1};
  }
  std::optional<std::vector<int32_t>> opening_turn() override {
    std::optional<std::vector<int32_t>> t;
    t.swap(opening);
    return t;
  }
  std::optional<std::vector<int32_t>> opening;  // what the next opening_turn() answers

 private:
  void log(const char* what, uint32_t rid, ClientMessage m) { calls.push_back({what, rid, std::move(m)}); }
  static ToolReply<ToolAck> ack_unless_99(uint32_t id) {
    if (id == 99) return ToolRefusal{WireError::kBadValue, "no PTY 99"};
    return ToolAck{};
  }
};

// The tool frames of the samples, in order (one or two of each opcode).
std::vector<ClientMessage> tool_samples() {
  std::vector<ClientMessage> out;
  for (const auto& [m, rid] : test::client_samples()) {
    if (is_tools_opcode(uint16_t(opcode_of(m)))) out.push_back(m);
  }
  return out;
}

// §4.21: a TOOL_DECLARE whose opening turn changed hands it to the next RESET's command; the
// positions after that reset (and every later one) start past it.
TEST(ServeSessionTools, ADeclaredOpeningTurnGoesWithTheNextResetAndMovesItsPositions) {
  FakeTools tools;
  Driver d;
  d.session().set_preamble(10);
  d.session().set_tools(&tools);
  d.handshake();
  tools.opening = std::vector<int32_t>(50, 7);
  d.send(2, ToolDeclare{R"([{"name":"ping"}])"});
  d.take_frames();
  d.send(3, StatsRequest{});
  EXPECT_EQ(only<Stats>(d.take_frames()).pos, 10u);  // this context keeps its turn
  d.send(4, Reset{});
  auto resets = commands_of<ResetCommand>(d.take_commands());
  ASSERT_EQ(resets.size(), 1u);
  ASSERT_TRUE(resets[0].preamble.has_value());
  EXPECT_EQ(resets[0].preamble->size(), 50u);
  d.reset_done();
  d.take_frames();
  d.send(5, StatsRequest{});
  EXPECT_EQ(only<Stats>(d.take_frames()).pos, 50u);
  d.send(6, Reset{});  // unchanged since: no new turn, the same length
  resets = commands_of<ResetCommand>(d.take_commands());
  ASSERT_EQ(resets.size(), 1u);
  EXPECT_FALSE(resets[0].preamble.has_value());
  d.reset_done();
  d.take_frames();
  d.send(7, StatsRequest{});
  EXPECT_EQ(only<Stats>(d.take_frames()).pos, 50u);
}

TEST(ServeSessionTools, WithoutToolsEveryFrameOfTheRangeIsNotAvailable) {
  Driver d;
  d.handshake();
  uint32_t rid = 10;
  for (const ClientMessage& m : tool_samples()) {
    d.send(rid, m);
    const auto out = d.take_frames();
    const auto& e = only<ErrorFrame>(out);
    EXPECT_EQ(e.code, WireError::kNotAvailable) << e.message;
    EXPECT_EQ(e.opcode, uint16_t(opcode_of(m)));
    EXPECT_EQ(out.at(0).request_id, rid);
    EXPECT_NE(e.message.find("--tools"), std::string::npos) << e.message;
    ++rid;
  }
  EXPECT_TRUE(d.take_commands().empty());
  d.send(50, StatsRequest{});  // the session goes on
  EXPECT_EQ(d.take_opcodes(), (Ops{{Opcode::kStats, 50}}));
}

TEST(ServeSessionTools, EveryFrameReachesItsCallWithItsRequestIdAndIsAnswered) {
  FakeTools tools;
  Driver d;
  d.session().set_tools(&tools);
  d.handshake();
  const std::vector<ClientMessage> frames = tool_samples();
  uint32_t rid = 100;
  Ops want;
  for (const ClientMessage& m : frames) {
    d.send(rid, m);
    const Opcode op = opcode_of(m);
    want.emplace_back(op == Opcode::kToolDeclare ? Opcode::kToolDeclared
                      : op == Opcode::kPtyOpen   ? Opcode::kPtyOpened
                      : op == Opcode::kPtyRead   ? Opcode::kPtyData
                      : op == Opcode::kInterruptRaise ? Opcode::kInterruptRaised
                                                 : Opcode::kToolAck,
                      rid);
    ++rid;
  }
  EXPECT_EQ(d.take_opcodes(), want);
  EXPECT_TRUE(d.take_commands().empty());  // tool frames are not engine commands
  // Every frame but TOOL_EVENTS (the session's own switch) reached the fake, as sent.
  size_t at = 0;
  rid = 100;
  for (const ClientMessage& m : frames) {
    if (!std::holds_alternative<ToolEvents>(m)) {
      ASSERT_LT(at, tools.calls.size());
      EXPECT_EQ(tools.calls[at].rid, rid);
      EXPECT_TRUE(tools.calls[at].frame == m) << tools.calls[at].what;
      ++at;
    }
    ++rid;
  }
  EXPECT_EQ(at, tools.calls.size());
  EXPECT_EQ(d.session().tool_events_mask(), 0xFu);
}

TEST(ServeSessionTools, RefusalsBecomeErrorFramesNamingTheFrame) {
  FakeTools tools;
  Driver d;
  d.session().set_tools(&tools);
  d.handshake();
  d.send(5, PtyWrite{99, PtyWriteMode::kKey, "enter"});
  d.send(6, ToolResult{77, ToolStatus::kOk, "1"});
  d.send(7, PtyClose{4});
  const auto out = d.take_frames();
  ASSERT_EQ(out.size(), 3u);
  const auto& bad = std::get<ErrorFrame>(out[0].message);
  EXPECT_EQ(out[0].request_id, 5u);
  EXPECT_EQ(bad.code, WireError::kBadValue);
  EXPECT_EQ(bad.opcode, uint16_t(Opcode::kPtyWrite));
  EXPECT_EQ(bad.message, "PTY_WRITE: no PTY 99");
  const auto& late = std::get<ErrorFrame>(out[1].message);
  EXPECT_EQ(late.code, WireError::kOutOfOrder);
  EXPECT_EQ(late.opcode, uint16_t(Opcode::kToolResult));
  EXPECT_EQ(opcode_of(out[2].message), Opcode::kToolAck);
  EXPECT_EQ(out[2].request_id, 7u);
}

TEST(ServeSessionTools, WhileGeneratingToolFramesAreHandledAtOnceAndAppendsStillWait) {
  FakeTools tools;
  Driver d;
  d.session().set_tools(&tools);
  d.start_generating(10);
  d.send(4, AppendText{"queued"});
  d.send(5, ToolResult{1, ToolStatus::kOk, R"({"ok":true})"});
  d.send(6, PtyWrite{2, PtyWriteMode::kBytes, "ls\r"});
  EXPECT_EQ(d.take_opcodes(), (Ops{{Opcode::kToolAck, 5}, {Opcode::kToolAck, 6}}));
  EXPECT_EQ(tools.calls.size(), 2u);
  EXPECT_TRUE(d.take_commands().empty());  // the append waits for DONE
  d.turn_end(2, 1);
  EXPECT_EQ(d.take_opcodes(), (Ops{{Opcode::kDone, 3}}));
  EXPECT_EQ(commands_of<AppendCommand>(d.take_commands()).size(), 1u);
}

TEST(ServeSessionTools, AnAnswerWaitsForTheAnswersBeforeIt) {
  FakeTools tools;
  Driver d;
  d.session().set_tools(&tools);
  d.handshake();
  d.send(2, AppendIds{{5}});
  d.send(3, PtyClose{4});  // answered by the fake at once, sent after APPENDED
  EXPECT_EQ(tools.calls.size(), 1u);
  EXPECT_TRUE(d.take_frames().empty());
  d.turn_end(1, 1);
  EXPECT_EQ(d.take_opcodes(), (Ops{{Opcode::kAppended, 2}, {Opcode::kToolAck, 3}}));
}

TEST(ServeSessionTools, ToolCallsCarryTheirGenerateIdAndStopAtInterrupt) {
  Driver d;
  FakeTools tools;
  d.session().set_tools(&tools);
  d.start_generating(10);  // GENERATE request 3 is turn 2
  d.token(2, 50, 1);
  d.session().tool_call(EngineToolCall{2, ToolCall{1, "get_weather", R"({"city":"Oslo"})"}}, d.out());
  d.session().tool_call(EngineToolCall{1, ToolCall{2, "stale", "{}"}}, d.out());  // not running
  const auto out = d.take_frames();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(opcode_of(out[0].message), Opcode::kToken);
  EXPECT_EQ(out[1].request_id, 3u);
  EXPECT_EQ(std::get<ToolCall>(out[1].message).name, "get_weather");
  d.send(4, Interrupt{});
  d.session().tool_call(EngineToolCall{2, ToolCall{3, "get_weather", "{}"}}, d.out());
  EXPECT_TRUE(d.take_frames().empty());  // cancelled with its generation
  d.turn_end(2, 2, DoneReason::kInterrupted);
  EXPECT_EQ(d.take_opcodes(), (Ops{{Opcode::kDone, 3}}));
}

TEST(ServeSessionTools, EventsGoOutAsTheMaskSaysNamedByTheirCause) {
  FakeTools tools;
  Driver d;
  d.session().set_tools(&tools);
  d.handshake();
  const auto event = [&](ToolEvent e, uint32_t rid, uint64_t turn) {
    d.session().tool_event(EngineToolEvent{std::move(e), rid, turn}, d.out());
  };
  event(ToolEvent{PtyOutputEvent{1, 0, 0, "hi\r\n", "hi\n"}}, 0, 0);  // mask 0: nothing
  EXPECT_TRUE(d.take_frames().empty());
  d.send(2, ToolEvents{tool_event_bit(ToolEventKind::kPtyOutput) |
                       tool_event_bit(ToolEventKind::kInterrupt)});
  EXPECT_EQ(d.take_opcodes(), (Ops{{Opcode::kToolAck, 2}}));
  event(ToolEvent{PtyOutputEvent{1, 0, 0, "hi\r\n", "hi\n"}}, 0, 0);
  event(ToolEvent{PtyStateEvent{1, PtyState::kExited, 0}}, 0, 0);  // not in the mask
  event(ToolEvent{InterruptEvent{7, InterruptState::kAcked}}, 31, 0);
  EXPECT_EQ(d.take_opcodes(), (Ops{{Opcode::kToolEvent, 0}, {Opcode::kToolEvent, 31}}));
  // A tool the model ran names the GENERATE of its turn.
  d.send(3, ToolEvents{kToolEventsKnownMask});
  d.send(4, AppendIds{{5}});
  d.turn_end(1, 1);
  d.send(9, generate(3));
  const uint64_t turn = commands_of<GenerateCommand>(d.take_commands()).at(0).turn;
  d.take_frames();
  event(ToolEvent{ToolRanEvent{1, ToolStatus::kOk, 12, 1, 5, 0, "read_file"}}, 0, turn);
  const auto out = d.take_frames();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].request_id, 9u);
  EXPECT_EQ(std::get<ToolRanEvent>(std::get<ToolEvent>(out[0].message).event).name, "read_file");
  // Off again.
  d.send(10, ToolEvents{0});
  d.take_frames();
  event(ToolEvent{InterruptEvent{8}}, 0, 0);
  EXPECT_TRUE(d.take_frames().empty());
}

TEST(ServeSessionTools, BeforeHelloToolFramesAreOutOfOrder) {
  FakeTools tools;
  Driver d;
  d.session().set_tools(&tools);
  d.send(2, PtyClose{1});
  const auto out = d.take_frames();
  EXPECT_EQ(only<ErrorFrame>(out).code, WireError::kOutOfOrder);
  EXPECT_TRUE(tools.calls.empty());
}

}  // namespace
}  // namespace infer::protocol::serve_test
