// Token streams for the call parser's tests, built by hand: ids as in Gemma 4's tokenizer, text
// cut into small pieces the way a BPE would cut it, and a feed() that collects what came out.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/tool_format/call_parser.h"

namespace infer::tool_test {

inline constexpr ToolTokens kIds{46, 47, 48, 49, 50, 51, 52};
inline constexpr int32_t kText = 1000;  // any ordinary token

struct Token {
  int32_t id;
  std::string piece;
};

// `text` in the format's spelling: the tool markers become their ids, the rest ordinary tokens
// of at most `piece_bytes` bytes each.
inline std::vector<Token> tokens_of(std::string_view text, size_t piece_bytes = 3) {
  const std::pair<std::string_view, int32_t> markers[] = {{kToolOpen, kIds.tool_open},
                                                          {kToolClose, kIds.tool_close},
                                                          {kToolCallOpen, kIds.call_open},
                                                          {kToolCallClose, kIds.call_close},
                                                          {kToolResponseOpen, kIds.response_open},
                                                          {kToolResponseClose, kIds.response_close},
                                                          {kToolString, kIds.string_delim}};
  std::vector<Token> out;
  size_t i = 0;
  while (i < text.size()) {
    bool matched = false;
    for (const auto& [spelling, id] : markers) {
      if (text.substr(i, spelling.size()) == spelling) {
        out.push_back({id, std::string(spelling)});
        i += spelling.size();
        matched = true;
        break;
      }
    }
    if (matched) continue;
    size_t n = 1;
    while (n < piece_bytes && i + n < text.size() && text[i + n] != '<') ++n;
    out.push_back({kText, std::string(text.substr(i, n))});
    i += n;
  }
  return out;
}

// Ordinary tokens only, even where the text spells a marker.
inline std::vector<Token> text_tokens(std::string_view text) {
  std::vector<Token> out;
  for (size_t i = 0; i < text.size(); i += 2)
    out.push_back({kText, std::string(text.substr(i, 2))});
  return out;
}

inline std::vector<Token> operator+(std::vector<Token> a, const std::vector<Token>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct Fed {
  std::vector<ToolCallOutcome> outcomes;
  std::string passed;  // the pieces passed through
  int stops = 0;
};

inline Fed feed(const std::vector<Token>& tokens, ToolCallLimits limits = {}, bool flush = true) {
  ToolCallParser parser(kIds, limits);
  Fed fed;
  for (const Token& t : tokens) {
    ToolCallStep s = parser.push(t.id, t.piece);
    if (s.pass_through) fed.passed += t.piece;
    if (s.finished) fed.outcomes.push_back(std::move(*s.finished));
    fed.stops += s.stop;
  }
  if (flush) {
    if (auto last = parser.flush()) fed.outcomes.push_back(std::move(*last));
    EXPECT_FALSE(parser.in_call());
  }
  return fed;
}

// The one call in `text`, which must parse.
inline ToolCall one_call(std::string_view text) {
  const Fed fed = feed(tokens_of(text));
  EXPECT_EQ(fed.outcomes.size(), 1u) << text;
  if (fed.outcomes.size() != 1) return {};
  if (const auto* e = std::get_if<ToolCallError>(&fed.outcomes[0])) {
    ADD_FAILURE() << text << ": " << e->what;
    return {};
  }
  return std::get<ToolCall>(fed.outcomes[0]);
}

// The one error in the stream, which must be an error.
inline ToolCallError one_error(const std::vector<Token>& tokens, ToolCallLimits limits = {}) {
  const Fed fed = feed(tokens, limits);
  EXPECT_EQ(fed.outcomes.size(), 1u);
  if (fed.outcomes.size() != 1 || !std::holds_alternative<ToolCallError>(fed.outcomes[0])) {
    ADD_FAILURE() << "expected one error";
    return {};
  }
  return std::get<ToolCallError>(fed.outcomes[0]);
}

}  // namespace infer::tool_test
