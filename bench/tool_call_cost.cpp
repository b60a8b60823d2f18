// tool_call_cost: what ToolCallParser::push costs per generated token, for ordinary tokens passed
// through (every token of every turn, tools on) and inside a 2,000-token call (parse included).
// Usage: build/bench/tool_call_cost
#include <chrono>
#include <cstdio>
#include <variant>

#include "model/tool_format/call_parser.h"

int main() {
  using Clock = std::chrono::steady_clock;
  const infer::ToolTokens ids{46, 47, 48, 49, 50, 51, 52};  // Gemma 4's, as from its tokenizer
  infer::ToolCallParser parser(ids);

  const int n_plain = 20'000'000;
  size_t passed = 0;
  Clock::time_point t0 = Clock::now();
  for (int i = 0; i < n_plain; ++i) passed += parser.push(1000 + (i & 1023), " word").pass_through;
  const double plain_ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();

  // call:write_file{path:<|"|>a.txt<|"|>,content:<|"|>...2,000 text tokens...<|"|>}
  const int n_calls = 2000;
  const int content_tokens = 2000;
  size_t calls_ok = 0;
  size_t in_call_tokens = 0;
  t0 = Clock::now();
  for (int c = 0; c < n_calls; ++c) {
    const auto tok = [&](int32_t id, const char* piece) {
      ++in_call_tokens;
      return parser.push(id, piece);
    };
    tok(ids.call_open, "");
    tok(1, "call:write_file{path:");
    tok(ids.string_delim, "");
    tok(1, "a.txt");
    tok(ids.string_delim, "");
    tok(1, ",content:");
    tok(ids.string_delim, "");
    for (int i = 0; i < content_tokens; ++i) tok(1, " text");
    tok(ids.string_delim, "");
    tok(1, "}");
    const infer::ToolCallStep end = tok(ids.call_close, "");
    calls_ok += end.finished && std::holds_alternative<infer::ToolCall>(*end.finished);
  }
  const double call_ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();

  std::printf("pass-through: %.1f ns/token (%zu of %d passed)\n", plain_ns / n_plain, passed,
              n_plain);
  std::printf("inside a call, parse included: %.1f ns/token (%zu of %d calls parsed)\n",
              call_ns / static_cast<double>(in_call_tokens), calls_ok, n_calls);
  return passed == static_cast<size_t>(n_plain) && calls_ok == n_calls ? 0 : 1;
}
