// Names of opcodes and error codes, for messages and logs (PROTOCOL.md §3, §5).
#include "protocol/opcodes.h"

#include "protocol/messages.h"

namespace infer::protocol {

const char* opcode_name(uint16_t op) {
  switch (static_cast<Opcode>(op)) {
    case Opcode::kHello: return "HELLO";
    case Opcode::kAppendText: return "APPEND_TEXT";
    case Opcode::kAppendIds: return "APPEND_IDS";
    case Opcode::kGenerate: return "GENERATE";
    case Opcode::kInterrupt: return "INTERRUPT";
    case Opcode::kStatsRequest: return "STATS_REQUEST";
    case Opcode::kTraceMark: return "TRACE_MARK";
    case Opcode::kReset: return "RESET";
    case Opcode::kShutdown: return "SHUTDOWN";
    case Opcode::kMemoryRecall: return "MEMORY_RECALL";
    case Opcode::kMemoryStore: return "MEMORY_STORE";
    case Opcode::kMemoryForget: return "MEMORY_FORGET";
    case Opcode::kMemoryQuery: return "MEMORY_QUERY";
    case Opcode::kMemoryWatch: return "MEMORY_WATCH";
    case Opcode::kToolDeclare: return "TOOL_DECLARE";
    case Opcode::kToolResult: return "TOOL_RESULT";
    case Opcode::kToolEvents: return "TOOL_EVENTS";
    case Opcode::kPtyOpen: return "PTY_OPEN";
    case Opcode::kPtyWrite: return "PTY_WRITE";
    case Opcode::kPtyResize: return "PTY_RESIZE";
    case Opcode::kPtyClose: return "PTY_CLOSE";
    case Opcode::kPtyRead: return "PTY_READ";
    case Opcode::kInterruptAction: return "INTERRUPT_ACTION";
    case Opcode::kInterruptRaise: return "INTERRUPT_RAISE";
    case Opcode::kServerHello: return "SERVER_HELLO";
    case Opcode::kToken: return "TOKEN";
    case Opcode::kGate: return "GATE";
    case Opcode::kDone: return "DONE";
    case Opcode::kStats: return "STATS";
    case Opcode::kError: return "ERROR";
    case Opcode::kTraceMarkAck: return "TRACE_MARK_ACK";
    case Opcode::kShutdownAck: return "SHUTDOWN_ACK";
    case Opcode::kAppended: return "APPENDED";
    case Opcode::kResetAck: return "RESET_ACK";
    case Opcode::kMemoryRecalled: return "MEMORY_RECALLED";
    case Opcode::kMemoryStored: return "MEMORY_STORED";
    case Opcode::kMemoryForgotten: return "MEMORY_FORGOTTEN";
    case Opcode::kMemoryList: return "MEMORY_LIST";
    case Opcode::kMemoryEvent: return "MEMORY_EVENT";
    case Opcode::kMemoryWatchAck: return "MEMORY_WATCH_ACK";
    case Opcode::kToolAck: return "TOOL_ACK";
    case Opcode::kToolDeclared: return "TOOL_DECLARED";
    case Opcode::kToolCall: return "TOOL_CALL";
    case Opcode::kPtyOpened: return "PTY_OPENED";
    case Opcode::kPtyData: return "PTY_DATA";
    case Opcode::kToolEvent: return "TOOL_EVENT";
    case Opcode::kInterruptRaised: return "INTERRUPT_RAISED";
  }
  return nullptr;
}

const char* wire_error_name(WireError e) {
  switch (e) {
    case WireError::kMalformed: return "MALFORMED";
    case WireError::kUnknownOpcode: return "UNKNOWN_OPCODE";
    case WireError::kFrameTooLarge: return "FRAME_TOO_LARGE";
    case WireError::kOutOfOrder: return "OUT_OF_ORDER";
    case WireError::kVersionMismatch: return "VERSION_MISMATCH";
    case WireError::kIdOutOfRange: return "ID_OUT_OF_RANGE";
    case WireError::kBadValue: return "BAD_VALUE";
    case WireError::kNotAvailable: return "NOT_AVAILABLE";
    case WireError::kEngine: return "ENGINE";
    case WireError::kTruncated: return "TRUNCATED";
    case WireError::kContextFull: return "CONTEXT_FULL";
  }
  return "UNKNOWN_ERROR";
}

Opcode opcode_of(const ClientMessage& m) {
  return std::visit([](const auto& x) { return x.kOpcode; }, m);
}
Opcode opcode_of(const ServerMessage& m) {
  return std::visit([](const auto& x) { return x.kOpcode; }, m);
}

}  // namespace infer::protocol
