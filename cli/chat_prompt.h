// Gemma 4 chat turns as ids (GEMMA4_CHAT.md "Turns"): the markers are control tokens, while the
// text a person wrote (a prompt, a system text) is encoded as plain text unless `special`, so
// typing "<turn|>" cannot end a turn or forge one. Used by --chat, the REPL and --serve --system.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/tokenizer/tokenizer.h"

namespace infer::cli {

struct ChatTurn {
  // The first turn after a start or reset: <bos>, then the system turn when there is one.
  bool opens_context = false;
  // A model turn is still open (its end id is not in the context): "<turn|>\n" closes it first.
  bool closes_model_turn = false;
  const std::optional<std::string>* system = nullptr;  // with opens_context
  std::string_view user;
  bool special = false;  // --special: user and system text may spell control tokens
};

// "<bos><|turn>system\n{system}<turn|>\n<|turn>user\n{user}<turn|>\n<|turn>model\n", the parts
// the turn's flags ask for.
std::vector<int32_t> chat_turn_ids(const Tokenizer& tok, const ChatTurn& turn);
// "<bos><|turn>system\n{system}<turn|>\n": what --serve --system starts every context with.
std::vector<int32_t> system_preamble_ids(const Tokenizer& tok, std::string_view system,
                                         bool special);

}  // namespace infer::cli
