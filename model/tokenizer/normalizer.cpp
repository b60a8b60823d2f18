// Normalizer: parsing from tokenizer.json and applying Replace/Prepend/Strip in order
// (HF tokenizers normalizers/{replace,prepend,strip}.rs).
#include "model/tokenizer/normalizer.h"

#include <nlohmann/json.hpp>

#include "model/tokenizer/json_fields.h"
#include "model/tokenizer/utf8.h"

namespace infer::tok {
namespace {

void replace_all(std::string_view text, std::string_view pattern, std::string_view content,
                 std::string& out) {
  out.clear();
  out.reserve(text.size() + text.size() / 2);
  size_t pos = 0;
  for (size_t hit; (hit = text.find(pattern, pos)) != std::string_view::npos;
       pos = hit + pattern.size()) {
    out.append(text.substr(pos, hit - pos));
    out.append(content);
  }
  out.append(text.substr(pos));
}

// Strip normalizer: Unicode whitespace off either end.
std::string_view strip(std::string_view s, bool left, bool right) {
  while (left && !s.empty()) {
    const size_t len = utf8_char_len(s, 0);
    if (!is_unicode_whitespace(utf8_decode(s.data(), len))) break;
    s.remove_prefix(len);
  }
  while (right && !s.empty()) {
    size_t i = s.size() - 1;
    while (i > 0 && s.size() - i < 4 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
    if (utf8_char_len(s, i) != s.size() - i) i = s.size() - 1;
    if (!is_unicode_whitespace(utf8_decode(s.data() + i, s.size() - i))) break;
    s.remove_suffix(s.size() - i);
  }
  return s;
}

}  // namespace

Result<void> Normalizer::add_steps(const nlohmann::json& j, std::string_view where,
                                   std::vector<Step>& steps) {
  if (j.is_null()) return Ok{};
  INFER_TRY(const std::string type, json_string(j, "type", where));
  const std::string at = std::string(where) + " (" + type + ")";
  if (type == "Sequence") {
    INFER_TRY(const nlohmann::json* list, json_array(j, "normalizers", at));
    for (size_t i = 0; i < list->size(); ++i) {
      INFER_TRY_VOID(add_steps((*list)[i], at + ".normalizers[" + std::to_string(i) + "]", steps));
    }
    return Ok{};
  }
  Step step{};
  if (type == "Replace") {
    step.kind = Step::Kind::kReplace;
    INFER_TRY(step.pattern, json_string_pattern(j, at));
    INFER_TRY(step.content, json_string(j, "content", at));
    if (step.pattern.empty()) return make_error(ErrorCode::kParse, at + ": empty pattern");
  } else if (type == "Prepend") {
    step.kind = Step::Kind::kPrepend;
    INFER_TRY(step.content, json_string(j, "prepend", at));
  } else if (type == "Strip") {
    step.kind = Step::Kind::kStrip;
    INFER_TRY(step.strip_left, json_bool(j, "strip_left", at));
    INFER_TRY(step.strip_right, json_bool(j, "strip_right", at));
  } else {
    return make_error(ErrorCode::kUnsupported,
                      std::string(where) + ": normalizer type \"" + type + "\" is not supported");
  }
  steps.push_back(std::move(step));
  return Ok{};
}

Result<Normalizer> Normalizer::from_json(const nlohmann::json& j, std::string_view where) {
  Normalizer n;
  INFER_TRY_VOID(add_steps(j, where, n.steps_));
  return n;
}

void Normalizer::apply(std::string_view text, std::string& out) const {
  out.assign(text);
  std::string tmp;
  for (const Step& s : steps_) {
    switch (s.kind) {
      case Step::Kind::kReplace:
        replace_all(out, s.pattern, s.content, tmp);
        out.swap(tmp);
        break;
      case Step::Kind::kPrepend:
        if (!out.empty()) out.insert(0, s.content);  // HF prepends to non-empty text only
        break;
      case Step::Kind::kStrip:
        tmp.assign(strip(out, s.strip_left, s.strip_right));
        out.swap(tmp);
        break;
    }
  }
}

}  // namespace infer::tok
