// The tool-call parser: fed the model's tokens one at a time as decode produces them, it passes
// ordinary tokens through and turns <|tool_call> ... <tool_call|> into a call or an error, by
// token id (GEMMA4_CHAT.md, Tools): a <|"|> token opens and closes a string whatever its
// neighbours spell, so text that merely spells a marker is content. No actors, no exceptions:
// every input, however broken, ends as a ToolCall or a ToolCallError.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "model/tool_format/call_grammar.h"
#include "model/tool_format/tool_tokens.h"
#include "model/tool_format/tool_writer.h"

namespace infer {

struct ToolCallLimits {
  size_t max_call_tokens = 65536;      // tokens between <|tool_call> and its end
  size_t max_call_bytes = 1 << 20;     // bytes of the call's text (a <|"|> counts as its spelling)
  int max_depth = kMaxToolValueDepth;  // nesting of objects and arrays; clamped to [1, 512]
  size_t max_raw_bytes = 4096;         // of a failed call's text kept in its ToolCallError
};

// What one token did.
struct ToolCallStep {
  bool pass_through = false;  // ordinary output, outside any call: show it, keep it
  // A call ended with this token (its <tool_call|>, or the model's own <|tool_response>), or a
  // limit ended it early, or a broken call was cut off by a new <|tool_call>.
  std::optional<ToolCallOutcome> finished;
  // The model wrote <|tool_response> itself: end this generation step here (the engine, not the
  // model, writes the response). The token is part of no output.
  bool stop = false;
};

class ToolCallParser {
 public:
  explicit ToolCallParser(const ToolTokens& tokens, ToolCallLimits limits = {});

  // One generated token: its id and the text decode gave for it (a StreamDecoder's piece; the
  // piece of a marker token is ignored, its id is what counts).
  //   outside a call: <|tool_call> opens one; <|tool_response> stops; anything else passes.
  //   inside a call: <|"|> opens or closes a string; <tool_call|> or <|tool_response> ends the
  //     call; a new <|tool_call> ends it as an error and opens the next; <|tool>, <tool|> and
  //     <tool_response|> outside a string make it an error; other tokens add their text.
  // Past a limit the call is reported as an error at once and the rest of it, up to its end
  // marker, is consumed without being kept.
  ToolCallStep push(int32_t id, std::string_view piece);

  // The end of generation: a call still open becomes an error (truncated), nullopt otherwise.
  // The parser is then outside any call.
  std::optional<ToolCallOutcome> flush();

  bool in_call() const { return state_ != State::kOutside; }

 private:
  enum class State { kOutside, kCollecting, kDiscarding };

  void open_call();
  ToolCallOutcome finish();  // the collected call, parsed
  ToolCallError error(std::string what) const;

  ToolTokens tokens_;
  ToolCallLimits limits_;
  State state_ = State::kOutside;
  bool in_string_ = false;
  std::vector<CallChunk> chunks_;
  size_t n_tokens_ = 0;
  size_t n_bytes_ = 0;
};

}  // namespace infer
