// ServeSession's tool frames (PROTOCOL.md §4.20-§4.29): requests handed to the ToolFrames at
// once, also while a generation runs (a TOOL_RESULT is what a paused generation waits for), and
// answered in arrival order; TOOL_CALLs on their GENERATE's request id; TOOL_EVENTs as the
// client's mask says, named by their cause.
#include <algorithm>

#include "base/overload.h"
#include "protocol/serve_session.h"

namespace infer::protocol {
namespace {

// The answer to a tool frame of opcode `op`, or the ERROR that replaces it.
template <class Answer>
ServerMessage reply_frame(Opcode op, ToolReply<Answer> reply) {
  if (auto* a = std::get_if<Answer>(&reply)) return ServerMessage{std::move(*a)};
  auto& no = std::get<ToolRefusal>(reply);
  return ServerMessage{ErrorFrame{no.code, uint16_t(op),
                                  std::string(opcode_name(uint16_t(op))) + ": " + no.message}};
}

}  // namespace

uint32_t ServeSession::turn_cause(uint64_t turn) const {
  const auto it = std::find_if(causes_.rbegin(), causes_.rend(), [&](const Cause& c) {
    return !c.ticket && c.number == turn;
  });
  return it != causes_.rend() ? it->rid : 0;
}

void ServeSession::take_tool_frame(uint32_t rid, const ClientMessage& m, SessionOutput& out) {
  const Opcode op = opcode_of(m);
  if (const auto* e = std::get_if<ToolEvents>(&m)) {  // the session's own switch
    tool_events_mask_ = e->mask;
    answer(rid, ServerMessage{ToolAck{}}, out);
    return;
  }
  if (tools_ == nullptr) {  // the reader refuses these first; kept for a ToolFrames taken away
    answer(rid,
           ServerMessage{ErrorFrame{WireError::kNotAvailable, uint16_t(op),
                                    std::string(opcode_name(uint16_t(op))) + ": tools are off"}},
           out);
    return;
  }
  ToolFrames& t = *tools_;
  ServerMessage reply = std::visit(
      Overload{
          [&](const ToolDeclare& x) {
            ToolReply<ToolDeclared> r = t.declare(rid, x);
            // The system turn that now declares the client's tools opens the next context.
            if (std::holds_alternative<ToolDeclared>(r)) {
              if (std::optional<std::vector<int32_t>> turn = t.opening_turn()) {
                next_preamble_ = std::move(turn);
              }
            }
            return reply_frame(op, std::move(r));
          },
          [&](const ToolResult& x) { return reply_frame(op, t.result(rid, x)); },
          [&](const PtyOpen& x) { return reply_frame(op, t.pty_open(rid, x)); },
          [&](const PtyWrite& x) { return reply_frame(op, t.pty_write(rid, x)); },
          [&](const PtyResize& x) { return reply_frame(op, t.pty_resize(rid, x)); },
          [&](const PtyClose& x) { return reply_frame(op, t.pty_close(rid, x)); },
          [&](const PtyRead& x) { return reply_frame(op, t.pty_read(rid, x)); },
          [&](const InterruptAction& x) { return reply_frame(op, t.interrupt_action(rid, x)); },
          [&](const InterruptRaise& x) { return reply_frame(op, t.interrupt_raise(rid, x)); },
          [&](const auto&) {  // handle() sends only tool frames here
            return ServerMessage{ErrorFrame{WireError::kEngine, uint16_t(op), "not a tool frame"}};
          },
      },
      m);
  answer(rid, std::move(reply), out);
}

void ServeSession::tool_call(const EngineToolCall& c, SessionOutput& out) {
  // After INTERRUPT (RESET, SHUTDOWN) the generation's calls are cancelled: none goes out.
  if (c.turn == 0 || c.turn != gen_turn_ || gen_interrupted_) return;
  write(gen_rid_, ServerMessage{c.call}, out);  // not an answer: it goes out when it happens
}

void ServeSession::tool_event(const EngineToolEvent& e, SessionOutput& out) {
  if ((tool_events_mask_ & tool_event_bit(e.event.kind())) == 0) return;
  uint32_t rid = e.cause_request_id;
  if (rid == 0 && e.cause_turn != 0) rid = turn_cause(e.cause_turn);
  write(rid, ServerMessage{e.event}, out);
}

}  // namespace infer::protocol
