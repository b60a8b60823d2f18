// The tool frames' payloads (docs/PROTOCOL.md §4.20-§4.28) as plain structs; part of the
// ClientMessage and ServerMessage variants (protocol/messages.h). JSON fields are kept as the
// exact text that was sent (validated by the parser), so a frame re-encodes byte for byte and no
// JSON library is needed here; parse_tool_declarations() reads a TOOL_DECLARE's tools.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/result.h"
#include "protocol/opcodes.h"

namespace infer::protocol {

// ---- client → server

struct ToolDeclare {  // whole payload: a JSON array of {name, description, parameters}
  static constexpr Opcode kOpcode = Opcode::kToolDeclare;
  std::string json;
  bool operator==(const ToolDeclare&) const = default;
};

struct ToolResult {  // u32 call id, u32 status, rest: result JSON (ok) or message (error)
  static constexpr Opcode kOpcode = Opcode::kToolResult;
  uint32_t call_id = 0;
  ToolStatus status = ToolStatus::kOk;
  std::string text;
  bool operator==(const ToolResult&) const = default;
};

struct ToolEvents {  // u32 mask: bit (kind - 1) turns TOOL_EVENT kind on
  static constexpr Opcode kOpcode = Opcode::kToolEvents;
  uint32_t mask = 0;
  bool operator==(const ToolEvents&) const = default;
};

struct PtyOpen {  // u16 rows, u16 cols, u32 flags, u32 cwd bytes, cwd, rest: argv NUL-separated
  static constexpr Opcode kOpcode = Opcode::kPtyOpen;
  uint16_t rows = 24;
  uint16_t cols = 80;
  uint32_t flags = 0;  // none defined: must be 0
  std::string cwd;     // relative to ROOT; "" is ROOT
  std::vector<std::string> argv;
  bool operator==(const PtyOpen&) const = default;
};

struct PtyWrite {  // u32 PTY id, u32 mode, rest: bytes (mode 0) or a key name (mode 1)
  static constexpr Opcode kOpcode = Opcode::kPtyWrite;
  uint32_t pty_id = 0;
  PtyWriteMode mode = PtyWriteMode::kBytes;
  std::string data;
  bool operator==(const PtyWrite&) const = default;
};

struct PtyResize {  // u32 PTY id, u16 rows, u16 cols
  static constexpr Opcode kOpcode = Opcode::kPtyResize;
  uint32_t pty_id = 0;
  uint16_t rows = 0;
  uint16_t cols = 0;
  bool operator==(const PtyResize&) const = default;
};

struct PtyClose {  // u32 PTY id
  static constexpr Opcode kOpcode = Opcode::kPtyClose;
  uint32_t pty_id = 0;
  bool operator==(const PtyClose&) const = default;
};

struct PtyRead {  // u32 PTY id, u32 view, u64 from, u32 max_bytes
  static constexpr Opcode kOpcode = Opcode::kPtyRead;
  uint32_t pty_id = 0;
  PtyView view = PtyView::kRaw;
  uint64_t from = 0;
  uint32_t max_bytes = kMaxPtyIoBytes;
  bool operator==(const PtyRead&) const = default;
};

struct InterruptAction {  // u32 interrupt id, u32 action, u32 snooze_ms
  static constexpr Opcode kOpcode = Opcode::kInterruptAction;
  uint32_t interrupt_id = 0;
  InterruptActionKind action = InterruptActionKind::kAck;
  uint32_t snooze_ms = 0;  // snooze: 0 until the turn ends, else a delay; other actions: 0
  bool operator==(const InterruptAction&) const = default;
};

struct InterruptRaise {  // u32 channel, rest: the content (UTF-8)
  static constexpr Opcode kOpcode = Opcode::kInterruptRaise;
  uint32_t channel = 0;  // the client's own source number
  std::string text;
  bool operator==(const InterruptRaise&) const = default;
};

// ---- server → client

struct ToolAck {  // empty
  static constexpr Opcode kOpcode = Opcode::kToolAck;
  bool operator==(const ToolAck&) const = default;
};

struct ToolDeclared {  // u32 n_tools: client tools declared now
  static constexpr Opcode kOpcode = Opcode::kToolDeclared;
  uint32_t n_tools = 0;
  bool operator==(const ToolDeclared&) const = default;
};

struct ToolCall {  // u32 call id, u32 name bytes, name, rest: arguments (a JSON object)
  static constexpr Opcode kOpcode = Opcode::kToolCall;
  uint32_t call_id = 0;
  std::string name;
  std::string arguments = "{}";
  bool operator==(const ToolCall&) const = default;
};

struct PtyOpened {  // u32 PTY id, u32 pid
  static constexpr Opcode kOpcode = Opcode::kPtyOpened;
  uint32_t pty_id = 0;
  uint32_t pid = 0;
  bool operator==(const PtyOpened&) const = default;
};

struct PtyData {  // 52 bytes, partial line, rest: data
  static constexpr Opcode kOpcode = Opcode::kPtyData;
  uint32_t pty_id = 0;
  PtyView view = PtyView::kRaw;
  uint64_t from = 0;     // offset of data[0] in the view
  uint64_t next = 0;     // the offset to read from next
  uint64_t end = 0;      // all output so far ends here
  uint64_t skipped = 0;  // bytes between the offset asked for and `from`, gone from the ring
  PtyState state = PtyState::kRunning;
  uint32_t code = 0;         // exit status (kExited) or signal (kSignalled)
  std::string partial_line;  // text view: the unfinished last line, not consumed
  std::string data;
  bool operator==(const PtyData&) const = default;
};

struct InterruptRaised {  // u32 interrupt id
  static constexpr Opcode kOpcode = Opcode::kInterruptRaised;
  uint32_t interrupt_id = 0;
  bool operator==(const InterruptRaised&) const = default;
};

// TOOL_EVENT's kinds; the wire kind is the variant's index + 1.
struct ToolRanEvent {  // kind 1, 32 bytes, rest: the tool's name
  uint32_t call_id = 0;
  ToolStatus status = ToolStatus::kOk;
  uint32_t elapsed_ms = 0;
  uint64_t pos = 0;       // the response's first token in the stream
  uint32_t n_tokens = 0;  // the response's tokens
  uint32_t client = 0;    // 1: a client tool (TOOL_CALL), 0: built in
  std::string name;
  bool operator==(const ToolRanEvent&) const = default;
};
struct PtyOutputEvent {  // kind 2, 28 bytes, raw, rest: stripped text
  uint32_t pty_id = 0;
  uint64_t raw_from = 0;   // raw view offset of raw[0]
  uint64_t text_from = 0;  // text view offset of text[0]
  std::string raw;
  std::string text;
  bool operator==(const PtyOutputEvent&) const = default;
};
struct PtyStateEvent {  // kind 3, 16 bytes
  uint32_t pty_id = 0;
  PtyState state = PtyState::kExited;  // never kRunning
  uint32_t code = 0;
  bool operator==(const PtyStateEvent&) const = default;
};
struct InterruptEvent {  // kind 4, 44 bytes
  uint32_t interrupt_id = 0;
  InterruptState state = InterruptState::kPending;
  InterruptSource source = InterruptSource::kPty;
  uint32_t source_id = 0;  // the PTY id; a subshell's call id; a client's channel
  uint32_t snooze_ms = 0;  // kSnoozed: the delay, 0 until the turn ends
  uint64_t bytes = 0;      // what the interrupt holds (bursts coalesced)
  uint64_t pos = 0;        // kInjected: its first token in the stream
  uint32_t n_tokens = 0;   // kInjected: its tokens
  bool operator==(const InterruptEvent&) const = default;
};

struct ToolEvent {
  static constexpr Opcode kOpcode = Opcode::kToolEvent;
  std::variant<ToolRanEvent, PtyOutputEvent, PtyStateEvent, InterruptEvent> event;
  ToolEventKind kind() const { return static_cast<ToolEventKind>(event.index() + 1); }
  bool operator==(const ToolEvent&) const = default;
};

// ---- TOOL_DECLARE's content

struct DeclaredTool {
  std::string name;
  std::string description;
  std::string parameters_json;  // a JSON object, as compact text; "null" when not given
  bool operator==(const DeclaredTool&) const = default;
};

// The tools of a TOOL_DECLARE payload (PROTOCOL.md §4.21): ErrorCode::kParse for text that is
// not JSON (MALFORMED), kInvalidArgument for JSON of the wrong shape (BAD_VALUE). What the
// parser accepted always reads back.
Result<std::vector<DeclaredTool>> parse_tool_declarations(std::string_view json);

// [A-Za-z0-9_.$-], 1 to kMaxToolNameBytes bytes: the names Gemma 4's call syntax carries bare
// (the same rule as model/tool_format's is_tool_name, which protocol/ cannot include).
bool is_wire_tool_name(std::string_view name);

}  // namespace infer::protocol
