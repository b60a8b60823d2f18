// libFuzzer target: Gemma 4's tool-call parser and the tool-format writer. The first byte picks:
//   even: the rest is a token stream (a tag byte each: a marker id, or an ordinary token whose
//     piece is the next 1-8 bytes) fed to a parser with small limits taken from the input.
//     Nothing may crash or throw; each outcome must be well-formed; a token passes through
//     exactly when it is outside a call; after flush no call is open; and every call parsed
//     must come back unchanged through the writer and a fresh parser.
//   odd: the rest is JSON. Written as a call (a non-object as {value: ...}), encoded to ids with
//     the demo tokenizer plus the tool markers, decoded piece by piece and parsed, it must give
//     the same JSON; values nested past kMaxToolValueDepth must be refused by the writer.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "model/synth/demo_tokenizer.h"
#include "model/tokenizer/utf8.h"
#include "model/tokenizer/tokenizer.h"
#include "model/tool_format/call_parser.h"
#include "model/tool_format/format_pieces.h"
#include "model/tool_format/tool_tokens.h"
#include "model/tool_format/tool_writer.h"

namespace {

using infer::ToolCall;
using infer::ToolCallError;
using infer::ToolCallOutcome;
using infer::ToolCallParser;
using infer::ToolCallStep;
using infer::ToolTokens;
using json = nlohmann::json;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

// The demo model's tokenizer, which holds the format's markers as its last ids: small, so that
// strings break into many byte tokens, which is the hard case for a by-id parser fed decoded
// pieces.
const infer::Tokenizer& tokenizer() {
  static const infer::Tokenizer tok = [] {
    auto t = infer::Tokenizer::parse(infer::demo_tokenizer_json(1024), "demo tokenizer.json");
    check(t.ok());
    return std::move(t).value();
  }();
  return tok;
}

const ToolTokens& tool_tokens() {
  static const ToolTokens t = [] {
    auto r = ToolTokens::from(tokenizer());
    check(r.ok());
    return *r;
  }();
  return t;
}

// Whether v nests deeper than `limit` (stops looking past it: inputs can nest thousands deep).
bool deeper_than(const json& v, int limit) {
  if (!v.is_structured()) return false;
  if (limit <= 0) return true;
  for (const json& x : v) {
    if (deeper_than(x, limit - 1)) return true;
  }
  return false;
}

// Feeds written pieces as tokens straight (a marker as its id, a text as one token).
std::vector<ToolCallOutcome> parse_pieces(const infer::FormatPieces& pieces) {
  const ToolTokens& t = tool_tokens();
  const infer::Tokenizer& tok = tokenizer();
  ToolCallParser parser(t);
  std::vector<ToolCallOutcome> out;
  for (const infer::FormatPiece& p : pieces.pieces()) {
    const int32_t id = p.marker ? *tok.token_to_id(p.text) : 300;
    ToolCallStep s = parser.push(id, p.marker ? std::string_view() : std::string_view(p.text));
    if (s.finished) out.push_back(std::move(*s.finished));
  }
  if (auto last = parser.flush()) out.push_back(std::move(*last));
  return out;
}

bool is_call(const std::vector<ToolCallOutcome>& out, std::string_view name, const json& args) {
  if (out.size() != 1) return false;
  const auto* call = std::get_if<ToolCall>(&out[0]);
  return call && call->name == name && call->arguments == args;
}

void check_outcome(const ToolCallOutcome& o, const infer::ToolCallLimits& limits) {
  if (const auto* e = std::get_if<ToolCallError>(&o)) {
    check(!e->what.empty() && e->raw.size() <= limits.max_raw_bytes &&
          e->raw_bytes >= e->raw.size());
    check(infer::tok::is_valid_utf8(e->what));
    return;
  }
  const ToolCall& call = std::get<ToolCall>(o);
  check(infer::is_tool_name(call.name) && call.arguments.is_object());
  check(!deeper_than(call.arguments, limits.max_depth));
  // Parse -> write -> parse is the identity.
  const auto written = infer::call_pieces(call.name, call.arguments);
  check(written.ok());
  check(is_call(parse_pieces(*written), call.name, call.arguments));
}

void fuzz_tokens(const uint8_t* data, size_t size) {
  if (size < 4) return;
  const ToolTokens& t = tool_tokens();
  const int32_t markers[] = {t.tool_open,    t.tool_close,    t.call_open,
                             t.call_close,   t.response_open, t.response_close,
                             t.string_delim, t.string_delim,  t.call_open};
  infer::ToolCallLimits limits;
  limits.max_depth = 1 + data[0] % 8;
  limits.max_call_tokens = 1 + size_t{data[1]} * 4;
  limits.max_call_bytes = 1 + size_t{data[2]} * 16;
  limits.max_raw_bytes = data[3] % 64;
  ToolCallParser parser(t, limits);
  size_t i = 4;
  while (i < size) {
    const uint8_t tag = data[i++];
    int32_t id = 300;
    std::string_view piece;
    if (tag < 0x48) {
      id = markers[tag % 9];
    } else {
      const size_t n = std::min<size_t>(1 + (tag & 7), size - i);
      piece = std::string_view(reinterpret_cast<const char*>(data + i), n);
      i += n;
    }
    const bool was_in_call = parser.in_call();
    const ToolCallStep s = parser.push(id, piece);
    check(s.pass_through == (!was_in_call && id != t.call_open && id != t.response_open));
    if (s.finished) check_outcome(*s.finished, limits);
  }
  if (auto last = parser.flush()) check_outcome(*last, limits);
  check(!parser.in_call());
}

void fuzz_json(const uint8_t* data, size_t size) {
  const json v = json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return;
  const json args = v.is_object() ? v : json{{"value", v}};
  const auto written = infer::call_pieces("tool_1", args);
  check(written.ok() == !deeper_than(args, infer::kMaxToolValueDepth));
  if (!written.ok()) return;
  check(is_call(parse_pieces(*written), "tool_1", args));

  // Through real ids. "▁" (U+2581) is Gemma's space: its tokenizer decodes it as " ", so text
  // holding it cannot come back byte for byte through any tokenizer of this family.
  const std::string text = written->str();
  if (text.find("\xE2\x96\x81") != std::string::npos) return;
  const infer::Tokenizer& tok = tokenizer();
  const auto ids = infer::encode_pieces(tok, *written);
  check(ids.ok());
  check(tok.decode(*ids) == text);
  ToolCallParser parser(tool_tokens());
  infer::StreamDecoder stream(tok);
  std::vector<ToolCallOutcome> out;
  for (int32_t id : *ids) {
    std::string piece;
    stream.push(id, piece);
    ToolCallStep s = parser.push(id, piece);
    check(!s.pass_through);
    if (s.finished) out.push_back(std::move(*s.finished));
  }
  if (auto last = parser.flush()) out.push_back(std::move(*last));
  check(is_call(out, "tool_1", args));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) {
    fuzz_tokens(data + 1, size - 1);
  } else {
    fuzz_json(data + 1, size - 1);
  }
  return 0;
}
