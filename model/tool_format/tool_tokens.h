// Gemma 4's tool-format markers (GEMMA4_CHAT.md, Tools): their spellings, and their ids looked up
// in the checkpoint's tokenizer (never hard-coded: the ids differ between tokenizers).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "base/result.h"
#include "model/tokenizer/tokenizer.h"

namespace infer {

inline constexpr std::string_view kToolOpen = "<|tool>";  // a declaration
inline constexpr std::string_view kToolClose = "<tool|>";
inline constexpr std::string_view kToolCallOpen = "<|tool_call>";  // a call, by the model
inline constexpr std::string_view kToolCallClose = "<tool_call|>";
inline constexpr std::string_view kToolResponseOpen = "<|tool_response>";  // a result, by us
inline constexpr std::string_view kToolResponseClose = "<tool_response|>";
inline constexpr std::string_view kToolString = "<|\"|>";  // opens and closes a string
inline constexpr std::string_view kTurnOpen = "<|turn>";
inline constexpr std::string_view kTurnClose = "<turn|>";

// Every marker whose spelling, inside text we write (a description, a string value, a file's
// content), must stay text: matched as its added token it would end a string, a call or a turn.
// The tool markers and the tokenizer's other non-special chat markers (<|think|>, <|channel>,
// <channel|>) are added tokens that even SpecialText::kAsText matches; the turn markers are
// special (kAsText skips them) and are listed so that the cut does not depend on that.
inline constexpr std::array<std::string_view, 12> kFormatMarkers = {
    kToolOpen,   kToolClose, kToolCallOpen, kToolCallClose, kToolResponseOpen, kToolResponseClose,
    kToolString, kTurnOpen,  kTurnClose,    "<|think|>",    "<|channel>",      "<channel|>"};

// The ids of the tool markers in one tokenizer (46..52 in Gemma 4's).
struct ToolTokens {
  int32_t tool_open = -1;
  int32_t tool_close = -1;
  int32_t call_open = -1;
  int32_t call_close = -1;
  int32_t response_open = -1;
  int32_t response_close = -1;
  int32_t string_delim = -1;

  // kNotFound naming every marker the tokenizer lacks (a tokenizer without tool tokens).
  static Result<ToolTokens> from(const Tokenizer& tok);
};

}  // namespace infer
