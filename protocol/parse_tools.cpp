// Parsers of the tool frames (PROTOCOL.md §4.20-§4.28), sizes and limits checked before reading
// (MALFORMED), then the values (BAD_VALUE). A server frame that breaks its layout is MALFORMED
// whatever is wrong with it: a server does not send values a client could refuse.
#include <string>

#include "protocol/bytes.h"
#include "protocol/parse_detail.h"
#include "protocol/tool_json.h"

namespace infer::protocol::detail {
namespace {

// A JSON field of a client frame: not JSON is MALFORMED, nested past the limit BAD_VALUE.
Result<JsonShape> client_json(uint16_t op, const char* field, std::string_view text) {
  INFER_TRY_VOID(check_text(op, field, text, kMaxPayloadBytes));
  Result<JsonShape> shape = check_json(text);
  if (shape.ok()) return shape;
  const std::string what = std::string(field) + ": " + shape.error().message;
  return shape.error().code == ErrorCode::kParse ? malformed(op, what) : bad_value(op, what);
}

Result<void> within(uint16_t op, const char* field, size_t bytes, size_t limit) {
  if (bytes <= limit) return Ok{};
  return malformed(op, std::string(field) + " is " + std::to_string(bytes) +
                           " bytes, the limit is " + std::to_string(limit));
}

Result<void> rows_cols(uint16_t op, uint16_t rows, uint16_t cols) {
  if (rows != 0 && cols != 0) return Ok{};
  return bad_value(op, std::to_string(rows) + " rows x " + std::to_string(cols) +
                           " columns: both must be at least 1");
}

// ---- client → server

Result<ClientMessage> declare(uint16_t op, Bytes p) {
  ToolDeclare m;
  m.json = std::string(ByteReader(p).rest());
  INFER_TRY_VOID(check_text(op, "declarations", m.json, kMaxPayloadBytes));
  const auto tools = parse_tool_declarations(m.json);
  if (!tools.ok()) {
    return tools.error().code == ErrorCode::kParse ? malformed(op, tools.error().message)
                                                   : bad_value(op, tools.error().message);
  }
  return ClientMessage{std::move(m)};
}

Result<ClientMessage> result(uint16_t op, Bytes p) {
  INFER_TRY_VOID(size_at_least(op, p, 8));
  ByteReader r(p);
  ToolResult m;
  m.call_id = r.u32();
  const uint32_t status = r.u32();
  m.text = std::string(r.rest());
  if (status > kMaxToolStatus) {
    return bad_value(op, "status " + std::to_string(status) + ", not 0 (ok) or 1 (error)");
  }
  m.status = static_cast<ToolStatus>(status);
  if (m.status == ToolStatus::kError) {
    INFER_TRY_VOID(check_text(op, "error message", m.text, kMaxToolErrorBytes));
  } else {
    INFER_TRY_VOID(client_json(op, "result", m.text));
  }
  return ClientMessage{std::move(m)};
}

Result<ClientMessage> pty_open(uint16_t op, Bytes p) {
  constexpr size_t kFixed = 12;
  INFER_TRY_VOID(size_at_least(op, p, kFixed));
  ByteReader r(p);
  PtyOpen m;
  m.rows = r.u16();
  m.cols = r.u16();
  m.flags = r.u32();
  const uint32_t cwd_bytes = r.u32();
  INFER_TRY_VOID(within(op, "cwd", cwd_bytes, kMaxPtyArgBytes));
  if (cwd_bytes > r.remaining()) {
    return malformed(op, "a cwd of " + std::to_string(cwd_bytes) + " bytes with " +
                             std::to_string(r.remaining()) + " left");
  }
  m.cwd = std::string(r.text(cwd_bytes));
  INFER_TRY_VOID(check_text(op, "cwd", m.cwd, kMaxPtyArgBytes));
  const std::string_view args = r.rest();
  INFER_TRY_VOID(check_text(op, "argv", args, kMaxPayloadBytes));
  for (size_t at = 0;;) {  // k NULs separate k + 1 arguments
    const size_t nul = args.find('\0', at);
    const std::string_view arg = args.substr(at, nul == std::string_view::npos ? args.npos : nul - at);
    INFER_TRY_VOID(within(op, "an argument", arg.size(), kMaxPtyArgBytes));
    if (m.argv.size() == kMaxPtyArgs) {
      return malformed(op, "more than " + std::to_string(kMaxPtyArgs) + " arguments");
    }
    m.argv.emplace_back(arg);
    if (nul == std::string_view::npos) break;
    at = nul + 1;
  }
  if (m.flags != 0) return malformed(op, "flags are " + std::to_string(m.flags) + ", none defined");
  if (m.argv[0].empty()) return bad_value(op, "argv[0] (the program) is empty");
  INFER_TRY_VOID(rows_cols(op, m.rows, m.cols));
  return ClientMessage{std::move(m)};
}

Result<ClientMessage> pty_write(uint16_t op, Bytes p) {
  INFER_TRY_VOID(size_at_least(op, p, 8));
  ByteReader r(p);
  PtyWrite m;
  m.pty_id = r.u32();
  const uint32_t mode = r.u32();
  m.data = std::string(r.rest());
  if (mode > kMaxPtyWriteMode) {
    return bad_value(op, "mode " + std::to_string(mode) + ", not 0 (bytes) or 1 (key)");
  }
  m.mode = static_cast<PtyWriteMode>(mode);
  if (m.mode == PtyWriteMode::kBytes) {
    INFER_TRY_VOID(within(op, "data", m.data.size(), kMaxPtyIoBytes));
  } else {
    INFER_TRY_VOID(check_text(op, "key name", m.data, kMaxKeyNameBytes));
    if (m.data.empty()) return bad_value(op, "an empty key name");
  }
  return ClientMessage{std::move(m)};
}

Result<ClientMessage> pty_resize(uint16_t op, Bytes p) {
  INFER_TRY_VOID(size_is(op, p, 8));
  ByteReader r(p);
  PtyResize m;
  m.pty_id = r.u32();
  m.rows = r.u16();
  m.cols = r.u16();
  INFER_TRY_VOID(rows_cols(op, m.rows, m.cols));
  return ClientMessage{m};
}

Result<ClientMessage> pty_read(uint16_t op, Bytes p) {
  INFER_TRY_VOID(size_is(op, p, 20));
  ByteReader r(p);
  PtyRead m;
  m.pty_id = r.u32();
  const uint32_t view = r.u32();
  m.from = r.u64();
  m.max_bytes = r.u32();
  if (view > kMaxPtyView) {
    return bad_value(op, "view " + std::to_string(view) + ", not 0 (raw) or 1 (text)");
  }
  m.view = static_cast<PtyView>(view);
  if (m.max_bytes == 0 || m.max_bytes > kMaxPtyIoBytes) {
    return bad_value(op, "max_bytes " + std::to_string(m.max_bytes) + " is not in 1.." +
                             std::to_string(kMaxPtyIoBytes));
  }
  return ClientMessage{m};
}

Result<ClientMessage> interrupt_action(uint16_t op, Bytes p) {
  INFER_TRY_VOID(size_is(op, p, 12));
  ByteReader r(p);
  InterruptAction m;
  m.interrupt_id = r.u32();
  const uint32_t action = r.u32();
  m.snooze_ms = r.u32();
  if (action == 0 || action > kMaxInterruptAction) {
    return bad_value(op, "action " + std::to_string(action) + ", not 1 (ack), 2 (snooze), 3 (drop)");
  }
  m.action = static_cast<InterruptActionKind>(action);
  if (m.snooze_ms > kMaxSnoozeMs) {
    return bad_value(op, "snooze_ms " + std::to_string(m.snooze_ms) + " is above a day (" +
                             std::to_string(kMaxSnoozeMs) + ")");
  }
  if (m.action != InterruptActionKind::kSnooze && m.snooze_ms != 0) {
    return bad_value(op, "snooze_ms " + std::to_string(m.snooze_ms) + " with an action that is not snooze");
  }
  return ClientMessage{m};
}

Result<ClientMessage> interrupt_raise(uint16_t op, Bytes p) {
  INFER_TRY_VOID(size_at_least(op, p, 4));
  ByteReader r(p);
  InterruptRaise m;
  m.channel = r.u32();
  m.text = std::string(r.rest());
  INFER_TRY_VOID(check_text(op, "text", m.text, kMaxPtyIoBytes));
  if (m.text.empty()) return bad_value(op, "nothing to raise: the text is empty");
  return ClientMessage{std::move(m)};
}

// ---- server → client

Result<std::string> wire_name(uint16_t op, ByteReader& r, size_t bytes) {
  if (bytes > r.remaining()) {
    return malformed(op, "a name of " + std::to_string(bytes) + " bytes with " +
                             std::to_string(r.remaining()) + " left");
  }
  std::string name(r.text(bytes));
  if (!is_wire_tool_name(name)) return malformed(op, "the tool name is not 1-128 of [A-Za-z0-9_.$-]");
  return name;
}

Result<ServerMessage> tool_call(uint16_t op, Bytes p) {
  INFER_TRY_VOID(size_at_least(op, p, 8));
  ByteReader r(p);
  ToolCall m;
  m.call_id = r.u32();
  const uint32_t name_bytes = r.u32();
  INFER_TRY(m.name, wire_name(op, r, name_bytes));
  m.arguments = std::string(r.rest());
  INFER_TRY_VOID(check_text(op, "arguments", m.arguments, kMaxPayloadBytes));
  const Result<JsonShape> shape = check_json(m.arguments);
  if (!shape.ok()) return malformed(op, "arguments: " + shape.error().message);
  if (*shape != JsonShape::kObject) return malformed(op, "the arguments are not a JSON object");
  return ServerMessage{std::move(m)};
}

Result<ServerMessage> pty_data(uint16_t op, Bytes p) {
  constexpr size_t kFixed = 52;
  INFER_TRY_VOID(size_at_least(op, p, kFixed));
  ByteReader r(p);
  PtyData m;
  m.pty_id = r.u32();
  const uint32_t view = r.u32();
  m.from = r.u64();
  m.next = r.u64();
  m.end = r.u64();
  m.skipped = r.u64();
  const uint32_t state = r.u32();
  m.code = r.u32();
  const uint32_t partial = r.u32();
  if (view > kMaxPtyView) return malformed(op, "view " + std::to_string(view));
  // A read names an open PTY: running, exited or signalled, never closed.
  if (state >= uint32_t(PtyState::kClosed)) return malformed(op, "state " + std::to_string(state));
  m.view = static_cast<PtyView>(view);
  m.state = static_cast<PtyState>(state);
  INFER_TRY_VOID(within(op, "the partial line", partial, kMaxPtyArgBytes));
  if (partial > r.remaining()) return malformed(op, "the partial line does not fit");
  m.partial_line = std::string(r.text(partial));
  m.data = std::string(r.rest());
  INFER_TRY_VOID(within(op, "data", m.data.size(), kMaxPtyIoBytes));
  return ServerMessage{std::move(m)};
}

Result<ServerMessage> tool_event(uint16_t op, Bytes p) {
  INFER_TRY_VOID(size_at_least(op, p, 4));
  ByteReader r(p);
  const uint32_t kind = r.u32();
  ToolEvent m;
  switch (kind) {
    case uint32_t(ToolEventKind::kToolRan): {
      INFER_TRY_VOID(size_at_least(op, p, 32));
      ToolRanEvent e;
      e.call_id = r.u32();
      const uint32_t status = r.u32();
      e.elapsed_ms = r.u32();
      e.pos = r.u64();
      e.n_tokens = r.u32();
      e.client = r.u32();
      if (status > kMaxToolStatus || e.client > 1) {
        return malformed(op, "status " + std::to_string(status) + ", client " + std::to_string(e.client));
      }
      e.status = static_cast<ToolStatus>(status);
      INFER_TRY(e.name, wire_name(op, r, r.remaining()));
      m.event = std::move(e);
      break;
    }
    case uint32_t(ToolEventKind::kPtyOutput): {
      INFER_TRY_VOID(size_at_least(op, p, 28));
      PtyOutputEvent e;
      e.pty_id = r.u32();
      e.raw_from = r.u64();
      e.text_from = r.u64();
      const uint32_t raw = r.u32();
      INFER_TRY_VOID(within(op, "raw output", raw, kMaxPtyIoBytes));
      if (raw > r.remaining()) return malformed(op, "the raw output does not fit");
      e.raw = std::string(r.text(raw));
      e.text = std::string(r.rest());
      INFER_TRY_VOID(within(op, "text output", e.text.size(), kMaxPtyIoBytes));
      m.event = std::move(e);
      break;
    }
    case uint32_t(ToolEventKind::kPtyState): {
      INFER_TRY_VOID(size_is(op, p, 16));
      PtyStateEvent e;
      e.pty_id = r.u32();
      const uint32_t state = r.u32();
      e.code = r.u32();
      if (state == 0 || state > kMaxPtyState) return malformed(op, "PTY state " + std::to_string(state));
      e.state = static_cast<PtyState>(state);
      m.event = e;
      break;
    }
    case uint32_t(ToolEventKind::kInterrupt): {
      INFER_TRY_VOID(size_is(op, p, 44));
      InterruptEvent e;
      e.interrupt_id = r.u32();
      const uint32_t state = r.u32();
      const uint32_t source = r.u32();
      e.source_id = r.u32();
      e.snooze_ms = r.u32();
      e.bytes = r.u64();
      e.pos = r.u64();
      e.n_tokens = r.u32();
      if (state == 0 || state > kMaxInterruptState || source == 0 || source > kMaxInterruptSource) {
        return malformed(op, "interrupt state " + std::to_string(state) + ", source " +
                                 std::to_string(source));
      }
      e.state = static_cast<InterruptState>(state);
      e.source = static_cast<InterruptSource>(source);
      m.event = e;
      break;
    }
    default: return malformed(op, "kind " + std::to_string(kind));
  }
  return ServerMessage{std::move(m)};
}

}  // namespace

Result<ClientMessage> parse_tools_client(uint16_t op, Bytes p) {
  switch (static_cast<Opcode>(op)) {
    case Opcode::kToolDeclare: return declare(op, p);
    case Opcode::kToolResult: return result(op, p);
    case Opcode::kToolEvents: {
      INFER_TRY_VOID(size_is(op, p, 4));
      const uint32_t mask = ByteReader(p).u32();
      if (mask & ~kToolEventsKnownMask) {
        return bad_value(op, "mask " + std::to_string(mask) + " has bits above the 4 kinds");
      }
      return ClientMessage{ToolEvents{mask}};
    }
    case Opcode::kPtyOpen: return pty_open(op, p);
    case Opcode::kPtyWrite: return pty_write(op, p);
    case Opcode::kPtyResize: return pty_resize(op, p);
    case Opcode::kPtyClose:
      INFER_TRY_VOID(size_is(op, p, 4));
      return ClientMessage{PtyClose{ByteReader(p).u32()}};
    case Opcode::kPtyRead: return pty_read(op, p);
    case Opcode::kInterruptAction: return interrupt_action(op, p);
    case Opcode::kInterruptRaise: return interrupt_raise(op, p);
    default: return make_error(ErrorCode::kInternal, name_of(op) + ": not a tool request");
  }
}

Result<ServerMessage> parse_tools_server(uint16_t op, Bytes p) {
  switch (static_cast<Opcode>(op)) {
    case Opcode::kToolAck:
      INFER_TRY_VOID(size_is(op, p, 0));
      return ServerMessage{ToolAck{}};
    case Opcode::kToolDeclared: {
      INFER_TRY_VOID(size_is(op, p, 4));
      const uint32_t n = ByteReader(p).u32();
      if (n > kMaxDeclaredTools) return malformed(op, std::to_string(n) + " tools declared");
      return ServerMessage{ToolDeclared{n}};
    }
    case Opcode::kToolCall: return tool_call(op, p);
    case Opcode::kPtyOpened: {
      INFER_TRY_VOID(size_is(op, p, 8));
      ByteReader r(p);
      PtyOpened m;
      m.pty_id = r.u32();
      m.pid = r.u32();
      return ServerMessage{m};
    }
    case Opcode::kPtyData: return pty_data(op, p);
    case Opcode::kToolEvent: return tool_event(op, p);
    case Opcode::kInterruptRaised:
      INFER_TRY_VOID(size_is(op, p, 4));
      return ServerMessage{InterruptRaised{ByteReader(p).u32()}};
    default: return make_error(ErrorCode::kInternal, name_of(op) + ": not a tool answer");
  }
}

}  // namespace infer::protocol::detail
