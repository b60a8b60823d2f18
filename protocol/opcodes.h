// The --serve wire format's constants: frame header, limits, opcodes, error codes and enums, as
// docs/PROTOCOL.md §2–§4 define them. Every number here appears in that table, and nowhere else.
#pragma once

#include <cstddef>
#include <cstdint>

namespace infer::protocol {

inline constexpr uint32_t kProtocolVersion = 1;

// Header: u32 payload_bytes, u16 opcode, u16 flags, u32 request_id (PROTOCOL.md §2).
inline constexpr size_t kHeaderBytes = 12;
// Largest payload either side may send (1 MiB). A header announcing more is FRAME_TOO_LARGE.
inline constexpr uint32_t kMaxPayloadBytes = 1u << 20;
// Bounds inside payloads (PROTOCOL.md §4).
inline constexpr uint32_t kMaxStopIds = 64;
inline constexpr uint32_t kMaxLabelBytes = 1024;    // TRACE_MARK labels, client names
inline constexpr uint32_t kMaxMessageBytes = 1024;  // ERROR messages (the encoder truncates)
inline constexpr uint32_t kMaxListEpisodes = 4096;  // MEMORY_QUERY max_count (§4.14)
inline constexpr uint32_t kMaxPreviewBytes = 96;    // MEMORY_LIST previews (§4.17)
// Tool frames (§4.20-§4.28).
inline constexpr uint32_t kMaxDeclaredTools = 64;           // tools in one TOOL_DECLARE
inline constexpr uint32_t kMaxToolNameBytes = 128;          // [A-Za-z0-9_.$-], at least 1
inline constexpr uint32_t kMaxToolDescriptionBytes = 4096;  // a declaration's description
inline constexpr uint32_t kMaxJsonDepth = 64;               // nesting of any JSON field
inline constexpr uint32_t kMaxToolErrorBytes = 4096;        // TOOL_RESULT error messages
inline constexpr uint32_t kMaxPtyArgs = 256;                // PTY_OPEN argv entries
inline constexpr uint32_t kMaxPtyArgBytes = 4096;           // one argument, and the cwd
inline constexpr uint32_t kMaxPtyIoBytes = 65536;           // PTY_WRITE data, PTY_READ max_bytes,
                                                            // INTERRUPT_RAISE text
inline constexpr uint32_t kMaxKeyNameBytes = 32;            // PTY_WRITE key names
inline constexpr uint32_t kMaxSnoozeMs = 86400000;          // INTERRUPT_ACTION: a day

// Bit 15 of an opcode is its direction: 0 client→server, 1 server→client.
inline constexpr uint16_t kServerBit = 0x8000;
// Reserved for later issues; within each range, client→server without and server→client with
// kServerBit (PROTOCOL.md §3.3).
inline constexpr uint16_t kMemoryFirst = 0x0100, kMemoryLast = 0x01FF;
inline constexpr uint16_t kToolsFirst = 0x0200, kToolsLast = 0x02FF;

enum class Opcode : uint16_t {
  // client → server
  kHello = 0x0001,
  kAppendText = 0x0002,
  kAppendIds = 0x0003,
  kGenerate = 0x0004,
  kInterrupt = 0x0005,
  kStatsRequest = 0x0006,
  kTraceMark = 0x0007,
  kReset = 0x0008,
  kShutdown = 0x0009,
  kMemoryRecall = 0x0100,
  kMemoryStore = 0x0101,
  kMemoryForget = 0x0102,
  kMemoryQuery = 0x0103,
  kMemoryWatch = 0x0104,
  kToolDeclare = 0x0200,
  kToolResult = 0x0201,
  kToolEvents = 0x0202,
  kPtyOpen = 0x0203,
  kPtyWrite = 0x0204,
  kPtyResize = 0x0205,
  kPtyClose = 0x0206,
  kPtyRead = 0x0207,
  kInterruptAction = 0x0208,
  kInterruptRaise = 0x0209,
  // server → client
  kServerHello = 0x8001,
  kToken = 0x8002,
  kGate = 0x8003,
  kDone = 0x8004,
  kStats = 0x8005,
  kError = 0x8006,
  kTraceMarkAck = 0x8007,
  kShutdownAck = 0x8008,
  kAppended = 0x8009,
  kResetAck = 0x800A,
  kMemoryRecalled = 0x8100,
  kMemoryStored = 0x8101,
  kMemoryForgotten = 0x8102,
  kMemoryList = 0x8103,
  kMemoryEvent = 0x8104,
  kMemoryWatchAck = 0x8105,
  kToolAck = 0x8200,
  kToolDeclared = 0x8201,
  kToolCall = 0x8202,
  kPtyOpened = 0x8203,
  kPtyData = 0x8204,
  kToolEvent = 0x8205,
  kInterruptRaised = 0x8206,
};

inline constexpr bool is_server_opcode(uint16_t op) { return (op & kServerBit) != 0; }
inline constexpr bool is_memory_opcode(uint16_t op) {
  const uint16_t low = op & ~kServerBit;
  return low >= kMemoryFirst && low <= kMemoryLast;
}
inline constexpr bool is_tools_opcode(uint16_t op) {
  const uint16_t low = op & ~kServerBit;
  return low >= kToolsFirst && low <= kToolsLast;
}
// "HELLO", "TOKEN", ...; nullptr for an opcode v1 does not define.
const char* opcode_name(uint16_t op);

// ERROR frames' code field (PROTOCOL.md §5).
enum class WireError : uint16_t {
  kMalformed = 1,        // payload size/shape wrong, reserved bits set, invalid UTF-8
  kUnknownOpcode = 2,    // not a v1 opcode, or one of the other direction
  kFrameTooLarge = 3,    // header announced more than kMaxPayloadBytes; payload skipped
  kOutOfOrder = 4,       // not acceptable in the session's state (before HELLO, GENERATE twice)
  kVersionMismatch = 5,  // HELLO with another version: the session ends
  kIdOutOfRange = 6,     // a token id >= vocab_size
  kBadValue = 7,         // well-formed but out of range (temperature NaN, top_p 0, too many tokens)
  kNotAvailable = 8,     // a reserved memory/tools opcode this server does not serve
  kEngine = 9,           // the engine failed (I/O, GPU); the message says what
  kTruncated = 10,       // input ended inside a frame
  kContextFull = 11,     // a fixed cache (--no-ring) cannot take an append; nothing appended
};
const char* wire_error_name(WireError e);  // "MALFORMED", ...

enum class DoneReason : uint32_t {
  kEos = 1,          // an end id (SERVER_HELLO end_ids) with STOP_AT_EOT set
  kStopId = 2,       // one of the request's stop ids
  kLimit = 3,        // max_tokens generated
  kInterrupted = 4,  // INTERRUPT, RESET or SHUTDOWN
  kGate = 5,         // the gate chose stop-and-listen or act (GENERATE flag GATED)
  kError = 6,        // the engine failed; an ERROR frame came first
};
inline constexpr uint32_t kMaxDoneReason = 6;

enum class GateDecision : uint32_t { kSpeak = 0, kStopAndListen = 1, kAct = 2 };
inline constexpr uint32_t kMaxGateDecision = 2;

// GENERATE flags (PROTOCOL.md §4.4).
inline constexpr uint32_t kGenDefaultSampling = 1u << 0;  // use the server's sampling settings
inline constexpr uint32_t kGenStopAtEot = 1u << 1;        // end ids stop the generation
inline constexpr uint32_t kGenGated = 1u << 2;            // the gate may end the generation
inline constexpr uint32_t kGenGateEvents = 1u << 3;       // a GATE frame for every step
inline constexpr uint32_t kGenKnownFlags = 0xF;

// MEMORY_EVENT kinds (PROTOCOL.md §4.18).
enum class MemoryEventKind : uint32_t { kStored = 1, kRecalled = 2, kForgotten = 3, kReplaced = 4 };
inline constexpr uint32_t kMaxMemoryEventKind = 4;

// TOOL_RESULT status (§4.22).
enum class ToolStatus : uint32_t { kOk = 0, kError = 1 };
inline constexpr uint32_t kMaxToolStatus = 1;

// TOOL_EVENTS mask and TOOL_EVENT kinds (§4.23, §4.28): bit (kind - 1) of the mask turns a kind on.
enum class ToolEventKind : uint32_t { kToolRan = 1, kPtyOutput = 2, kPtyState = 3, kInterrupt = 4 };
inline constexpr uint32_t kMaxToolEventKind = 4;
inline constexpr uint32_t kToolEventsKnownMask = 0xF;
inline constexpr uint32_t tool_event_bit(ToolEventKind k) { return 1u << (uint32_t(k) - 1); }

// PTY_WRITE modes, PTY_READ views, PTY states (§4.25, §4.26, §4.28).
enum class PtyWriteMode : uint32_t { kBytes = 0, kKey = 1 };
inline constexpr uint32_t kMaxPtyWriteMode = 1;
enum class PtyView : uint32_t { kRaw = 0, kText = 1 };
inline constexpr uint32_t kMaxPtyView = 1;
enum class PtyState : uint32_t { kRunning = 0, kExited = 1, kSignalled = 2, kClosed = 3 };
inline constexpr uint32_t kMaxPtyState = 3;

// Interrupts (§4.27, §4.28): what a client asks, the states an interrupt goes through, and
// where it came from.
enum class InterruptActionKind : uint32_t { kAck = 1, kSnooze = 2, kDrop = 3 };
inline constexpr uint32_t kMaxInterruptAction = 3;
enum class InterruptState : uint32_t {
  kPending = 1,
  kAcked = 2,
  kSnoozed = 3,
  kDropped = 4,
  kInjected = 5,
};
inline constexpr uint32_t kMaxInterruptState = 5;
enum class InterruptSource : uint32_t { kPty = 1, kSubshell = 2, kClient = 3 };
inline constexpr uint32_t kMaxInterruptSource = 3;

// STATS flags.
inline constexpr uint32_t kStatsGenerating = 1u << 0;

inline constexpr uint32_t kNoToken = 0xFFFFFFFFu;  // DONE.last_id when nothing was generated

}  // namespace infer::protocol
