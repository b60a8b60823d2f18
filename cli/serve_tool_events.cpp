// tools_vfs and pipeline events -> TOOL_EVENT payloads (docs/PROTOCOL.md §4.28).
#include "cli/serve_tool_events.h"

#include <algorithm>

namespace infer::cli {
namespace {

protocol::InterruptState wire_state(tools::InterruptEventKind k) {
  switch (k) {
    case tools::InterruptEventKind::kRaised:
    case tools::InterruptEventKind::kWoke: return protocol::InterruptState::kPending;
    case tools::InterruptEventKind::kAcked: return protocol::InterruptState::kAcked;
    case tools::InterruptEventKind::kSnoozed: return protocol::InterruptState::kSnoozed;
    case tools::InterruptEventKind::kDropped: return protocol::InterruptState::kDropped;
    case tools::InterruptEventKind::kInjected: return protocol::InterruptState::kInjected;
  }
  return protocol::InterruptState::kPending;
}

protocol::InterruptSource wire_source(tools::SourceKind k) {
  switch (k) {
    case tools::SourceKind::kPty: return protocol::InterruptSource::kPty;
    case tools::SourceKind::kSubshell: return protocol::InterruptSource::kSubshell;
    case tools::SourceKind::kClient: return protocol::InterruptSource::kClient;
  }
  return protocol::InterruptSource::kClient;
}

}  // namespace

protocol::InterruptEvent interrupt_event(const tools::InterruptEvent& e, uint32_t snooze_ms) {
  protocol::InterruptEvent w;
  w.interrupt_id = uint32_t(e.id);
  w.state = wire_state(e.kind);
  w.source = wire_source(e.source.kind);
  w.source_id = uint32_t(e.source.id);
  w.snooze_ms = w.state == protocol::InterruptState::kSnoozed ? snooze_ms : 0;
  w.bytes = e.text_bytes;
  return w;
}

protocol::PtyState pty_state(const tools::PtyStatus& s) {
  if (s.running) return protocol::PtyState::kRunning;
  return s.exited ? protocol::PtyState::kExited : protocol::PtyState::kSignalled;
}

uint32_t pty_code(const tools::PtyStatus& s) {
  if (s.running) return 0;
  return s.exited ? uint32_t(s.exit_code) : uint32_t(s.signal);
}

protocol::PtyStateEvent pty_state_event(tools::PtyId id, const tools::PtyStatus& s) {
  protocol::PtyStateEvent w;
  w.pty_id = id;
  w.state = s.exited ? protocol::PtyState::kExited : protocol::PtyState::kSignalled;
  w.code = pty_code(s);
  return w;
}

protocol::ToolRanEvent tool_ran_event(const actors::ToolEvent& e, bool client) {
  protocol::ToolRanEvent w;
  w.call_id = uint32_t(e.call_id);
  w.status = e.kind == actors::ToolEventKind::kResult ? protocol::ToolStatus::kOk
                                                       : protocol::ToolStatus::kError;
  w.elapsed_ms = uint32_t(std::clamp(e.ms, 0.0, double(UINT32_MAX)));
  w.client = client ? 1 : 0;
  // A malformed call's name may be unreadable: the response names it "invalid_call"
  // (actors/tool_loop.cpp), and so does the event, whose name must be a tool name.
  w.name = protocol::is_wire_tool_name(e.name) ? e.name : "invalid_call";
  return w;
}

}  // namespace infer::cli
