// Looks the tool markers up in a tokenizer's added tokens.
#include "model/tool_format/tool_tokens.h"

#include <optional>
#include <string>

namespace infer {

Result<ToolTokens> ToolTokens::from(const Tokenizer& tok) {
  ToolTokens t;
  std::string missing;
  const auto find = [&](std::string_view spelling, int32_t& id) {
    const std::optional<int32_t> found = tok.token_to_id(spelling);
    if (found) {
      id = *found;
    } else {
      missing += missing.empty() ? "" : ", ";
      missing += spelling;
    }
  };
  find(kToolOpen, t.tool_open);
  find(kToolClose, t.tool_close);
  find(kToolCallOpen, t.call_open);
  find(kToolCallClose, t.call_close);
  find(kToolResponseOpen, t.response_open);
  find(kToolResponseClose, t.response_close);
  find(kToolString, t.string_delim);
  if (!missing.empty()) {
    return make_error(ErrorCode::kNotFound,
                      "tokenizer has no tool-call tokens (Gemma 4's format): missing " + missing);
  }
  return t;
}

}  // namespace infer
