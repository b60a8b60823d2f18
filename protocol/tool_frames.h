// ToolFrames: what the --serve session hands the tool frames to (PROTOCOL.md §4.20-§4.29). The
// session parses and orders the frames, keeps TOOL_EVENTS' mask itself and writes the answers;
// an implementation (the tools actor's side, wired in cli/) runs them. A ServeSession without
// one answers every client frame of the tools range NOT_AVAILABLE (the server runs without
// --tools).
//
// Each call happens inside ServeSession::feed(), under the serve front end's lock, in the order
// the frames arrived, also while a generation runs: it must be quick (no waiting on the
// engine) and must not call back into the session. It returns the frame's answer or the ERROR
// to send instead (PROTOCOL.md §4.21-§4.27 list which code for what). What a frame causes later
// (the interrupt it acked going out as TOOL_EVENT, a PTY's output) comes back through
// ServeSession::tool_event() naming `request_id` as its cause.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "protocol/tool_messages.h"

namespace infer::protocol {

// An ERROR in place of the answer: BAD_VALUE (an unknown id, a key name pty_keys does not know,
// a program that cannot start, too many PTYs), OUT_OF_ORDER (a result for a call already
// answered or cancelled, an action on an interrupt that is done), ENGINE (the system failed).
struct ToolRefusal {
  WireError code = WireError::kBadValue;
  std::string message;
};

template <class Answer>
using ToolReply = std::variant<Answer, ToolRefusal>;

class ToolFrames {
 public:
  virtual ~ToolFrames() = default;

  // Replaces the client's tools (an empty list withdraws them); a name of a built-in tool is
  // BAD_VALUE. parse_tool_declarations(d.json) reads them (the parser has checked they read).
  virtual ToolReply<ToolDeclared> declare(uint32_t request_id, const ToolDeclare& d) = 0;
  // The answer to TOOL_CALL `r.call_id`.
  virtual ToolReply<ToolAck> result(uint32_t request_id, const ToolResult& r) = 0;
  virtual ToolReply<PtyOpened> pty_open(uint32_t request_id, const PtyOpen& o) = 0;
  virtual ToolReply<ToolAck> pty_write(uint32_t request_id, const PtyWrite& w) = 0;
  virtual ToolReply<ToolAck> pty_resize(uint32_t request_id, const PtyResize& r) = 0;
  virtual ToolReply<ToolAck> pty_close(uint32_t request_id, const PtyClose& c) = 0;
  virtual ToolReply<PtyData> pty_read(uint32_t request_id, const PtyRead& r) = 0;
  virtual ToolReply<ToolAck> interrupt_action(uint32_t request_id, const InterruptAction& a) = 0;
  // A client event: a new interrupt of source kClient, channel `r.channel`, or the one of that
  // channel still pending or snoozed, the text coalesced into it.
  virtual ToolReply<InterruptRaised> interrupt_raise(uint32_t request_id, const InterruptRaise& r) = 0;
  // After a TOOL_DECLARE it answered: the ids every context opens with from the next RESET on
  // (the system turn declaring the built-in and the client's tools, §4.21); nullopt: unchanged.
  virtual std::optional<std::vector<int32_t>> opening_turn() { return std::nullopt; }
};

// ---- engine -> session (ServeSession::tool_call, ServeSession::tool_event)

// The model of generating turn `turn` called client tool `call.name`: a TOOL_CALL carrying the
// GENERATE's request id. A call of a turn that has ended is dropped (the engine cancelled it).
struct EngineToolCall {
  uint64_t turn = 0;
  ToolCall call;
};

// Something happened to a tool, a PTY or an interrupt. Its cause: a client frame's request id,
// else a generating turn (a call its model made), else nothing (background: PTY output, a new
// interrupt) and the frame carries request id 0.
struct EngineToolEvent {
  ToolEvent event;
  uint32_t cause_request_id = 0;
  uint64_t cause_turn = 0;
};

}  // namespace infer::protocol
