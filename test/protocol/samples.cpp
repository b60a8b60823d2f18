// Sample messages for the round-trip, golden and Python cross-check tests.
#include "test/protocol/samples.h"

#include <limits>
#include <string>

namespace infer::protocol::test {

std::vector<std::pair<ClientMessage, uint32_t>> client_samples() {
  Generate g;
  g.max_tokens = 200;
  g.flags = kGenStopAtEot | kGenGated;
  g.seed = 0x0123456789ABCDEFull;
  g.temperature = 0.7f;
  g.top_p = 0.95f;
  g.top_k = 64;
  g.stop_ids = {1, 106, 262143};
  return {
      {Hello{kProtocolVersion, "pytest-client \xC3\xA9"}, 1},
      {AppendText{"Hello, w\xC3\xB6rld \xF0\x9F\x98\x80\n"}, 2},
      {AppendText{""}, 3},
      {AppendIds{{2, 105, 2364, 262143}}, 4},
      {AppendIds{{}}, 5},
      {g, 0xFFFFFFFFu},
      {Generate{}, 7},
      {Interrupt{}, 8},
      {StatsRequest{}, 9},
      {TraceMark{"turn 2 \xE2\x86\x92 start"}, 10},
      {Reset{}, 11},
      {Shutdown{}, 0},
      {MemoryRecall{"what did we say about the r\xC3\xB6ver?"}, 12},
      {MemoryRecall{""}, 13},
      {MemoryStore{}, 14},
      {MemoryForget{0x0102030405060708ull}, 15},
      {MemoryQuery{3, 4096}, 16},
      {MemoryWatch{1}, 17},
      {ToolDeclare{R"([{"name":"get_weather","description":"Weather in a city )"
                   "\xE2\x98\x80"
                   R"(","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}])"},
       18},
      {ToolDeclare{"[]"}, 19},
      {ToolResult{0x01020304, ToolStatus::kOk, R"({"temp_c":21.5,"sky":"clear"})"}, 20},
      {ToolResult{7, ToolStatus::kError, "no such city: Atl\xC3\xA4ntis"}, 21},
      {ToolEvents{0xF}, 22},
      {PtyOpen{40, 120, 0, "src/\xC3\xA9", {"bash", "-c", "", "echo hi"}}, 23},
      {PtyOpen{1, 1, 0, "", {"cat"}}, 24},
      {PtyWrite{3, PtyWriteMode::kBytes, std::string("ls\r\0\xFF", 5)}, 25},
      {PtyWrite{3, PtyWriteMode::kKey, "ctrl-c"}, 26},
      {PtyResize{3, 50, 200}, 27},
      {PtyClose{0x80000001u}, 28},
      {PtyRead{3, PtyView::kText, 0x100000000ull, 65536}, 29},
      {InterruptAction{9, InterruptActionKind::kSnooze, 1500}, 30},
      {InterruptAction{10, InterruptActionKind::kAck, 0}, 31},
      {InterruptRaise{0xFFFFFFFFu, "build finished \xE2\x9C\x93"}, 32},
  };
}

std::vector<std::pair<ServerMessage, uint32_t>> server_samples() {
  ServerHello h;
  h.vocab_size = 262144;
  h.max_generate_tokens = 4096;
  h.context_tokens = 640;
  h.end_ids = {1, 106};
  h.model_name = "gemma-4-E2B \xE2\x9C\x93";
  Gate gate{GateDecision::kStopAndListen, 12, 2.5f, 0.31f, 0.42f, -0.0f,
            std::numeric_limits<float>::denorm_min()};
  Stats stats{1000, 640, 800, 200, 3, 1234.5, 56.25, 987654, kStatsGenerating, 2};
  return {
      {h, 1},
      {Token{2364, 0, 17, "Hi"}, 6},
      {Token{236743, 1, 18, ""}, 6},  // ends inside a character: no text yet
      {Token{1, 2, 19, "\xC3\xA9"}, 6},
      {gate, 6},
      {Done{DoneReason::kInterrupted, 3, 20, 1, "\xEF\xBF\xBD"}, 6},
      {Done{DoneReason::kLimit, 0, 20, kNoToken, ""}, 7},
      {stats, 9},
      {ErrorFrame{WireError::kOutOfOrder, 0x0004, "GENERATE while a generation runs"}, 7},
      {TraceMarkAck{123456789012ull, "turn 2 \xE2\x86\x92 start"}, 10},
      {ShutdownAck{}, 0},
      {Appended{21, 4}, 4},
      {ResetAck{}, 11},
      {MemoryRecalled{{{70000, 64, 0.875f, 0.8f, 2.5f, 3600}, {5, 12, -0.0f, -1.0f, 0.25f, 0}}},
       12},
      {MemoryRecalled{}, 12},
      {MemoryStored{{{1, 0, 64}, {0x100000000ull, 0x200000000ull, 7}}}, 14},
      {MemoryForgotten{0x0102030405060708ull}, 15},
      {MemoryList{130, {{1, 0, 64, 1.5f, 1765000000000ull, 0, "Hello, w\xC3\xB6rld"},
                        {2, 64, 3, 0.5f, 1765000000001ull, 1765000000002ull, ""}}},
       16},
      {MemoryList{0, {}}, 16},
      {MemoryEvent{MemoryEventKind::kRecalled, 9, 128, 64, 0.75f, 0.7f, 2.0f}, 4},
      {MemoryEvent{MemoryEventKind::kReplaced, 1, 0, 64, 0.0f, 0.0f, 0.125f}, 0},
      {MemoryWatchAck{}, 17},
      {ToolAck{}, 25},
      {ToolDeclared{1}, 18},
      {ToolCall{5, "get_weather", "{\"city\":\"Z\xC3\xBCrich\",\"days\":[1,2]}"}, 6},
      {PtyOpened{3, 4242}, 23},
      {PtyData{3, PtyView::kText, 10, 20, 30, 2, PtyState::kExited, 1, "Password: ",
               std::string("done\n\0\xFE", 7)},
       29},
      {PtyData{1, PtyView::kRaw, 0, 0, 0, 0, PtyState::kRunning, 0, "", ""}, 29},
      {ToolEvent{ToolRanEvent{5, ToolStatus::kError, 1234, 0x100000000ull, 17, 1, "get_weather"}}, 6},
      {ToolEvent{PtyOutputEvent{3, 100, 50, "\x1b[1mhi\x1b[0m\r\n", "hi\n"}}, 0},
      {ToolEvent{PtyStateEvent{3, PtyState::kSignalled, 9}}, 28},
      {ToolEvent{InterruptEvent{9, InterruptState::kInjected, InterruptSource::kPty, 3, 0, 4096,
                                0x200000000ull, 12}},
       30},
      {InterruptRaised{11}, 32},
  };
}

}  // namespace infer::protocol::test
