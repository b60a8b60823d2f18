// Decoder steps (HF tokenizers decoders/{replace,byte_fallback,fuse,strip}.rs), applied to the
// whole token list in order; ByteFallback turns a run of <0xNN> tokens into its UTF-8 text.
#include "model/tokenizer/decoder.h"

#include <nlohmann/json.hpp>

#include "model/tokenizer/json_fields.h"
#include "model/tokenizer/utf8.h"

namespace infer::tok {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Result<size_t> json_count(const nlohmann::json& j, std::string_view key, std::string_view where) {
  INFER_TRY(const nlohmann::json* v, json_field(j, key, where));
  if (!v->is_number_unsigned()) return field_error(where, key, "a non-negative integer");
  return v->get<size_t>();
}

}  // namespace

int byte_token_value(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  const int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

Result<void> Decoder::add_steps(const nlohmann::json& j, std::string_view where,
                                std::vector<DecoderStep>& steps) {
  INFER_TRY(const std::string type, json_string(j, "type", where));
  const std::string at = std::string(where) + " (" + type + ")";
  DecoderStep step{};
  if (type == "Sequence") {
    INFER_TRY(const nlohmann::json* list, json_array(j, "decoders", at));
    for (size_t i = 0; i < list->size(); ++i) {
      INFER_TRY_VOID(add_steps((*list)[i], at + ".decoders[" + std::to_string(i) + "]", steps));
    }
    return Ok{};
  } else if (type == "Replace") {
    step.kind = DecoderStep::Kind::kReplace;
    INFER_TRY(step.pattern, json_string_pattern(j, at));
    INFER_TRY(step.content, json_string(j, "content", at));
    if (step.pattern.empty()) return make_error(ErrorCode::kParse, at + ": empty pattern");
  } else if (type == "ByteFallback") {
    step.kind = DecoderStep::Kind::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = DecoderStep::Kind::kFuse;
  } else if (type == "Strip") {
    step.kind = DecoderStep::Kind::kStrip;
    INFER_TRY(step.content, json_string(j, "content", at));
    INFER_TRY(step.start, json_count(j, "start", at));
    INFER_TRY(step.stop, json_count(j, "stop", at));
    if (step.content.empty() || utf8_char_len(step.content, 0) != step.content.size()) {
      return make_error(ErrorCode::kParse, at + ": \"content\" must be one character");
    }
  } else {
    return make_error(ErrorCode::kUnsupported,
                      std::string(where) + ": decoder type \"" + type + "\" is not supported");
  }
  steps.push_back(std::move(step));
  return Ok{};
}

Result<Decoder> Decoder::from_json(const nlohmann::json& j, std::string_view where) {
  Decoder d;
  if (j.is_null()) return d;
  d.present_ = true;
  INFER_TRY_VOID(add_steps(j, where, d.steps_));
  return d;
}

void Decoder::replace_in(std::string& s, const DecoderStep& step) {
  if (s.find(step.pattern) == std::string::npos) return;
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(step.pattern, pos)) != std::string::npos;
       pos = hit + step.pattern.size()) {
    out.append(s, pos, hit - pos);
    out.append(step.content);
  }
  out.append(s, pos);
  s.swap(out);
}

void Decoder::strip_in(std::string& s, const DecoderStep& step) {
  const std::string& c = step.content;
  size_t begin = 0;
  for (size_t n = 0; n < step.start && s.compare(begin, c.size(), c) == 0; ++n) begin += c.size();
  size_t end = s.size();
  for (size_t n = 0;
       n < step.stop && end >= begin + c.size() && s.compare(end - c.size(), c.size(), c) == 0;
       ++n) {
    end -= c.size();
  }
  s = s.substr(begin, end - begin);
}

// A run of byte tokens becomes its text when valid UTF-8, else one U+FFFD per byte (HF replaces
// the whole run, not just the broken sequence).
void Decoder::byte_fallback(std::vector<std::string>& tokens) {
  std::vector<std::string> out;
  out.reserve(tokens.size());
  std::string run;
  const auto flush = [&] {
    if (run.empty()) return;
    if (is_valid_utf8(run)) {
      out.push_back(run);
    } else {
      for (size_t i = 0; i < run.size(); ++i) out.emplace_back(kReplacementChar);
    }
    run.clear();
  };
  for (std::string& t : tokens) {
    const int b = byte_token_value(t);
    if (b >= 0) {
      run.push_back(static_cast<char>(b));
    } else {
      flush();
      out.push_back(std::move(t));
    }
  }
  flush();
  tokens.swap(out);
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  if (!present_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  for (const DecoderStep& step : steps_) {
    switch (step.kind) {
      case DecoderStep::Kind::kReplace:
        for (std::string& t : tokens) replace_in(t, step);
        break;
      case DecoderStep::Kind::kStrip:
        for (std::string& t : tokens) strip_in(t, step);
        break;
      case DecoderStep::Kind::kByteFallback:
        byte_fallback(tokens);
        break;
      case DecoderStep::Kind::kFuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
    }
  }
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

}  // namespace infer::tok
