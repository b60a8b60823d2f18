// The tool side of --serve's output (docs/PROTOCOL.md §4.22, §4.28): what ServeTools hands the
// front end, in the order it goes to the session, and the conversions from tools_vfs's and the
// pipeline's events to TOOL_EVENT payloads. Pure functions, no state.
#pragma once

#include <cstdint>
#include <variant>
#include <vector>

#include "actors/events.h"
#include "protocol/serve_session.h"
#include "tools_vfs/interrupts.h"
#include "tools_vfs/pty_set.h"

namespace infer::cli {

// Frames-to-be for ServeSession: tool_event(), token(), tool_call(), in this order.
using ToolStreamItem =
    std::variant<protocol::EngineToolEvent, protocol::EngineToken, protocol::EngineToolCall>;
struct ToolStreamOutput {
  std::vector<ToolStreamItem> items;
};

// An interrupt's transition as TOOL_EVENT `interrupt`. snooze_ms: the snooze's delay (snoozed
// only). pos and n_tokens stay 0 (an `injected` event gets them from its tokens).
protocol::InterruptEvent interrupt_event(const tools::InterruptEvent& e, uint32_t snooze_ms);
// A PTY's end as TOOL_EVENT `pty_state` (exited or ended by a signal).
protocol::PtyStateEvent pty_state_event(tools::PtyId id, const tools::PtyStatus& s);
// PTY_DATA's state and code for a status.
protocol::PtyState pty_state(const tools::PtyStatus& s);
uint32_t pty_code(const tools::PtyStatus& s);
// A finished call (kResult, kError) as TOOL_EVENT `tool_ran`; pos and n_tokens are the
// response's, filled in when its tokens are counted.
protocol::ToolRanEvent tool_ran_event(const actors::ToolEvent& e, bool client);

}  // namespace infer::cli
