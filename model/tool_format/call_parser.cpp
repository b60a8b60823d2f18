// The tool-call state machine: outside a call, collecting one, or discarding the rest of one
// that already failed a limit.
#include "model/tool_format/call_parser.h"

#include <algorithm>
#include <string>

namespace infer {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The name after "call:" in a call that could not be parsed whole (for its error response).
std::string guess_name(const std::vector<CallChunk>& chunks) {
  if (chunks.empty()) return {};
  std::string_view t = chunks.front().text;
  const auto skip_space = [&t] {
    while (!t.empty() && is_space(t.front())) t.remove_prefix(1);
  };
  skip_space();
  if (t.substr(0, 4) != "call") return {};
  t.remove_prefix(4);
  skip_space();
  if (t.empty() || t.front() != ':') return {};
  t.remove_prefix(1);
  skip_space();
  size_t n = 0;
  while (n < t.size() && is_bare_key(t.substr(n, 1))) ++n;
  return is_tool_name(t.substr(0, n)) ? std::string(t.substr(0, n)) : std::string();
}

}  // namespace

ToolCallParser::ToolCallParser(const ToolTokens& tokens, ToolCallLimits limits)
    : tokens_(tokens), limits_(limits) {
  // The grammar recurses once per level: the clamp keeps a careless limit off the stack's end.
  limits_.max_depth = std::clamp(limits_.max_depth, 1, 512);
}

void ToolCallParser::open_call() {
  state_ = State::kCollecting;
  in_string_ = false;
  chunks_.assign(1, CallChunk{});
  n_tokens_ = 0;
  n_bytes_ = 0;
}

ToolCallError ToolCallParser::error(std::string what) const {
  ToolCallError e;
  e.name = guess_name(chunks_);
  e.what = std::move(what);
  e.raw = call_text(chunks_);
  e.raw_bytes = e.raw.size();
  if (e.raw.size() > limits_.max_raw_bytes) {
    size_t cut = limits_.max_raw_bytes;
    // Cut at a character boundary so that the kept text stays valid UTF-8 where it was.
    while (cut > 0 && (static_cast<unsigned char>(e.raw[cut]) & 0xC0) == 0x80) --cut;
    e.raw.resize(cut);
  }
  return e;
}

ToolCallOutcome ToolCallParser::finish() {
  if (in_string_) {
    return error("the call ended inside a string (a " + std::string(kToolString) +
                 " was not closed)");
  }
  ToolCallOutcome out = parse_call_body(chunks_, limits_.max_depth);
  if (auto* e = std::get_if<ToolCallError>(&out)) {
    ToolCallError full = error(std::move(e->what));
    if (!e->name.empty()) full.name = std::move(e->name);
    out = std::move(full);
  }
  return out;
}

ToolCallStep ToolCallParser::push(int32_t id, std::string_view piece) {
  ToolCallStep step;
  switch (state_) {
    case State::kOutside:
      if (id == tokens_.call_open) {
        open_call();
      } else if (id == tokens_.response_open) {
        step.stop = true;
      } else {
        step.pass_through = true;
      }
      return step;
    case State::kDiscarding:
      if (id == tokens_.call_open) {
        open_call();
      } else if (id == tokens_.call_close || id == tokens_.response_open) {
        state_ = State::kOutside;
        step.stop = id == tokens_.response_open;
      }
      return step;
    case State::kCollecting:
      break;
  }
  if (id == tokens_.call_close || id == tokens_.response_open) {
    step.finished = finish();
    step.stop = id == tokens_.response_open;
    state_ = State::kOutside;
    return step;
  }
  if (id == tokens_.call_open) {
    step.finished = error("a new " + std::string(kToolCallOpen) + " began before this call's " +
                          std::string(kToolCallClose));
    open_call();
    return step;
  }
  const auto fail = [&](std::string what) {
    step.finished = error(std::move(what));
    state_ = State::kDiscarding;
    return step;
  };
  if (++n_tokens_ > limits_.max_call_tokens) {
    return fail("the call is longer than " + std::to_string(limits_.max_call_tokens) + " tokens");
  }
  const bool delim = id == tokens_.string_delim;
  if (n_bytes_ + (delim ? kToolString.size() : piece.size()) > limits_.max_call_bytes) {
    return fail("the call is longer than " + std::to_string(limits_.max_call_bytes) + " bytes");
  }
  if (delim) {
    n_bytes_ += kToolString.size();
    in_string_ = !in_string_;
    chunks_.push_back(CallChunk{in_string_, {}});
    return step;
  }
  if (!in_string_) {
    const std::string_view marker = id == tokens_.tool_open        ? kToolOpen
                                    : id == tokens_.tool_close     ? kToolClose
                                    : id == tokens_.response_close ? kToolResponseClose
                                                                   : std::string_view();
    if (!marker.empty()) return fail(std::string(marker) + " inside a call, outside any string");
  }
  n_bytes_ += piece.size();
  chunks_.back().text.append(piece);
  return step;
}

std::optional<ToolCallOutcome> ToolCallParser::flush() {
  const State was = state_;
  state_ = State::kOutside;
  if (was != State::kCollecting) return std::nullopt;
  return ToolCallOutcome(
      error("generation ended inside the call (no " + std::string(kToolCallClose) + ")"));
}

}  // namespace infer
