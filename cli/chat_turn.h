// The ids of one Gemma chat user turn as the REPL and the pipe mode append it (GEMMA4_CHAT.md):
// the chat markers are the tokenizer's added tokens, what the user typed never is (unless
// --special), so a user cannot close their turn or forge the model's.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "model/tokenizer/tokenizer.h"
#include "model/tool_format/tool_writer.h"

namespace infer::cli {

struct ChatTurnSpec {
  // The first turn after a start or /reset: <bos>, then the system turn when there is one.
  // Every later turn first closes the model's turn with "<turn|>\n" (the end id the model
  // sampled, or where it was interrupted, is not in the context).
  bool opens_context = true;
  std::optional<std::string_view> system;  // --system TEXT
  bool special = false;  // --special: user and system text may spell the chat's control tokens
  // Declared tools (--tools): written after the system text in Gemma 4's format
  // (system_turn_pieces), which opens a system turn even without --system.
  std::span<const ToolDeclaration> tools;
};

// "[<bos>[<|turn>system\n{system}{tools}<turn|>\n]|<turn|>\n]<|turn>user\n{user}<turn|>\n
// <|turn>model\n" with the markers matched as added tokens and the texts between them encoded
// with encode_unmarked (no marker spelled in them becomes its token: not <|turn>, and not the
// tool markers <|tool_call>, <|"|>, ... nor <|channel>, which even SpecialText::kAsText
// matches), or SpecialText::kMatch with spec.special. Template text and user text between two
// markers are encoded together, so the ids equal those of the whole string encoded with
// kMatch whenever the texts spell no marker (the chat fixtures' prompts). The declarations must
// be writable (ToolRegistry checked them) and the tokenizer must have the tool markers.
std::vector<int32_t> chat_turn_ids(const Tokenizer& tok, std::string_view user,
                                           const ChatTurnSpec& spec);
// "<bos><|turn>system\n{system}{tools}<turn|>\n", encoded the same way: what --serve --system
// opens every context with (the client appends the user turns).
std::vector<int32_t> system_turn_ids(const Tokenizer& tok, std::string_view system,
                                     bool special);
std::vector<int32_t> system_turn_ids(const Tokenizer& tok, std::string_view system, bool special,
                                     std::span<const ToolDeclaration> tools);

}  // namespace infer::cli
