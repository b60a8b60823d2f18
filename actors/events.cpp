// Names of the event enums, for the REPL, logs and traces.
#include "actors/events.h"

namespace infer::actors {

const char* decision_name(Decision d) {
  switch (d) {
    case Decision::kSpeak:
      return "speak";
    case Decision::kListen:
      return "listen";
    case Decision::kAct:
      return "act";
  }
  return "?";
}

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::kEndToken:
      return "end of turn";
    case StopReason::kStopId:
      return "stop id";
    case StopReason::kSink:
      return "stopped by the receiver";
    case StopReason::kTokenLimit:
      return "token limit";
    case StopReason::kInterrupted:
      return "interrupted";
    case StopReason::kGate:
      return "gate";
    case StopReason::kContextFull:
      return "context full";
    case StopReason::kError:
      return "error";
    case StopReason::kNoGenerate:
      return "no generation";
  }
  return "?";
}

const char* tool_event_kind_name(ToolEventKind k) {
  switch (k) {
    case ToolEventKind::kCall:
      return "call";
    case ToolEventKind::kResult:
      return "result";
    case ToolEventKind::kError:
      return "error";
    case ToolEventKind::kNotRun:
      return "not run";
    case ToolEventKind::kClientCall:
      return "client call";
  }
  return "?";
}

}  // namespace infer::actors
