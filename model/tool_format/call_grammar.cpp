// A recursive-descent reader for a tool call's body over collected chunks; no exceptions, no
// recursion deeper than max_depth.
#include "model/tool_format/call_grammar.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>

#include "model/tokenizer/utf8.h"
#include "model/tool_format/tool_tokens.h"
#include "model/tool_format/tool_writer.h"

namespace infer {
namespace {

using json = nlohmann::json;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_punct(char c) {
  return c == '{' || c == '}' || c == '[' || c == ']' || c == ':' || c == ',';
}

struct Lexeme {
  enum Kind { kEnd, kString, kPunct, kWord } kind = kEnd;
  std::string_view text;  // the string's content, the word, or the punctuation character
  size_t offset = 0;      // where it starts in call_text()
};

// Splits the chunks into strings, punctuation and words.
class Lexer {
 public:
  explicit Lexer(std::span<const CallChunk> chunks) : chunks_(chunks) {}

  Lexeme next() {
    while (chunk_ < chunks_.size()) {
      const CallChunk& c = chunks_[chunk_];
      if (c.string) {
        Lexeme s{Lexeme::kString, c.text, chunk_start_};
        next_chunk();
        return s;
      }
      const std::string_view t = c.text;
      while (pos_ < t.size() && is_space(t[pos_])) ++pos_;
      if (pos_ == t.size()) {
        next_chunk();
        continue;
      }
      const size_t begin = pos_;
      if (is_punct(t[pos_])) {
        ++pos_;
      } else {
        while (pos_ < t.size() && !is_space(t[pos_]) && !is_punct(t[pos_])) ++pos_;
      }
      return Lexeme{is_punct(t[begin]) ? Lexeme::kPunct : Lexeme::kWord,
                    t.substr(begin, pos_ - begin), chunk_start_ + begin};
    }
    return Lexeme{Lexeme::kEnd, {}, chunk_start_};
  }

 private:
  void next_chunk() {
    // call_text() puts a <|"|> between chunks.
    chunk_start_ += chunks_[chunk_].text.size() + kToolString.size();
    ++chunk_;
    pos_ = 0;
  }

  std::span<const CallChunk> chunks_;
  size_t chunk_ = 0;
  size_t pos_ = 0;
  size_t chunk_start_ = 0;
};

std::string describe(const Lexeme& l) {
  switch (l.kind) {
    case Lexeme::kEnd:
      return "the end of the call";
    case Lexeme::kString:
      return "a string";
    case Lexeme::kPunct:
      return std::string("'").append(l.text).append("'");
    case Lexeme::kWord:
      break;
  }
  // Printable ASCII only: the message may end up in a JSON frame, which needs valid UTF-8.
  std::string w(l.text.substr(0, 32));
  for (char& c : w) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7F) c = '?';
  }
  return std::string("\"").append(w).append(l.text.size() > 32 ? "...\"" : "\"");
}

bool is_punct(const Lexeme& l, char c) { return l.kind == Lexeme::kPunct && l.text[0] == c; }

// A JSON number (RFC 8259 grammar) to an int64, a uint64 or a finite double.
std::optional<json> read_number(std::string_view w) {
  size_t i = 0;
  const auto digits = [&] {
    const size_t from = i;
    while (i < w.size() && w[i] >= '0' && w[i] <= '9') ++i;
    return i > from;
  };
  if (i < w.size() && w[i] == '-') ++i;
  if (i < w.size() && w[i] == '0') {
    ++i;
  } else if (!digits()) {
    return std::nullopt;
  }
  bool integer = true;
  if (i < w.size() && w[i] == '.') {
    ++i;
    integer = false;
    if (!digits()) return std::nullopt;
  }
  if (i < w.size() && (w[i] == 'e' || w[i] == 'E')) {
    ++i;
    integer = false;
    if (i < w.size() && (w[i] == '+' || w[i] == '-')) ++i;
    if (!digits()) return std::nullopt;
  }
  if (i != w.size()) return std::nullopt;
  const char* first = w.data();
  const char* last = w.data() + w.size();
  if (integer) {
    int64_t s = 0;
    if (auto r = std::from_chars(first, last, s); r.ec == std::errc() && r.ptr == last)
      return json(s);
    uint64_t u = 0;
    if (auto r = std::from_chars(first, last, u); r.ec == std::errc() && r.ptr == last)
      return json(u);
  }
  double d = 0;
  const auto r = std::from_chars(first, last, d);
  if (r.ec != std::errc() || r.ptr != last || !std::isfinite(d)) return std::nullopt;
  return json(d);
}

class Grammar {
 public:
  Grammar(std::span<const CallChunk> chunks, int max_depth) : lex_(chunks), max_depth_(max_depth) {}

  ToolCallOutcome parse() {
    Lexeme l = lex_.next();
    if (l.kind != Lexeme::kWord || l.text != "call") {
      return fail(l, "expected call:NAME{...}, found " + describe(l));
    }
    if (!is_punct(l = lex_.next(), ':'))
      return fail(l, "expected ':' after call, found " + describe(l));
    l = lex_.next();
    if (l.kind != Lexeme::kWord || !is_tool_name(l.text)) {
      return fail(l, "expected a tool name of [A-Za-z0-9_.$-] after call:, found " + describe(l));
    }
    name_ = std::string(l.text);
    if (!is_punct(l = lex_.next(), '{')) {
      return fail(l, "expected '{' after the tool name, found " + describe(l));
    }
    json args;
    if (!object(args, 1)) return error_;
    if ((l = lex_.next()).kind != Lexeme::kEnd) {
      return fail(l, "expected the end of the call after its arguments, found " + describe(l));
    }
    return ToolCall{name_, std::move(args)};
  }

 private:
  ToolCallError fail(const Lexeme& at, std::string what) {
    error_.name = name_;
    error_.what = "at byte " + std::to_string(at.offset) + " of the call: " + what;
    return error_;
  }
  bool failed(const Lexeme& at, std::string what) {
    fail(at, std::move(what));
    return false;
  }
  bool check_depth(const Lexeme& at, int depth) {
    if (depth <= max_depth_) return true;
    return failed(at, "objects and arrays nested deeper than " + std::to_string(max_depth_));
  }

  // After '{'.
  bool object(json& out, int depth) {
    out = json::object();
    Lexeme l = lex_.next();
    if (!check_depth(l, depth)) return false;
    if (is_punct(l, '}')) return true;
    for (;;) {
      if (l.kind != Lexeme::kWord && l.kind != Lexeme::kString) {
        return failed(l, "expected a key, found " + describe(l));
      }
      if (!tok::is_valid_utf8(l.text)) return failed(l, "key is not valid UTF-8");
      std::string key(l.text);
      if (out.contains(key)) return failed(l, "key " + describe(l) + " appears twice");
      if (!is_punct(l = lex_.next(), ':')) {
        return failed(l, "expected ':' after a key, found " + describe(l));
      }
      json v;
      if (!value(v, depth)) return false;
      out[std::move(key)] = std::move(v);
      l = lex_.next();
      if (is_punct(l, '}')) return true;
      if (!is_punct(l, ','))
        return failed(l, "expected ',' or '}' in an object, found " + describe(l));
      l = lex_.next();
    }
  }

  // After '['.
  bool array(json& out, int depth) {
    out = json::array();
    Lexeme l = lex_.next();
    if (!check_depth(l, depth)) return false;
    if (is_punct(l, ']')) return true;
    for (;;) {
      json v;
      if (!value(v, depth, &l)) return false;
      out.push_back(std::move(v));
      l = lex_.next();
      if (is_punct(l, ']')) return true;
      if (!is_punct(l, ','))
        return failed(l, "expected ',' or ']' in an array, found " + describe(l));
      l = lex_.next();
    }
  }

  // A value inside a container at `depth`; `first` is its first lexeme when already read.
  bool value(json& out, int depth, const Lexeme* first = nullptr) {
    const Lexeme l = first ? *first : lex_.next();
    if (is_punct(l, '{')) return object(out, depth + 1);
    if (is_punct(l, '[')) return array(out, depth + 1);
    if (l.kind == Lexeme::kString) {
      if (!tok::is_valid_utf8(l.text)) return failed(l, "string is not valid UTF-8");
      out = std::string(l.text);
      return true;
    }
    if (l.kind != Lexeme::kWord) return failed(l, "expected a value, found " + describe(l));
    if (l.text == "true" || l.text == "false") {
      out = l.text == "true";
      return true;
    }
    if (l.text == "null") {
      out = nullptr;
      return true;
    }
    std::optional<json> n = read_number(l.text);
    if (!n) {
      return failed(l, describe(l) + " is not a number, true, false or null (strings go between " +
                           std::string(kToolString) + ")");
    }
    out = std::move(*n);
    return true;
  }

  Lexer lex_;
  int max_depth_;
  std::string name_;
  ToolCallError error_;
};

}  // namespace

ToolCallOutcome parse_call_body(std::span<const CallChunk> chunks, int max_depth) {
  return Grammar(chunks, max_depth).parse();
}

std::string call_text(std::span<const CallChunk> chunks) {
  std::string out;
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (i > 0) out += kToolString;
    out += chunks[i].text;
  }
  return out;
}

}  // namespace infer
