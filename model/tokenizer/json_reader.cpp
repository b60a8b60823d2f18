// SAX handler behind read_tokenizer_json: builds a DOM with a stack of open containers, except
// inside root.model.vocab and root.model.merges, whose entries it appends to flat arrays.
#include "model/tokenizer/json_reader.h"

namespace infer::tok {
namespace {

using nlohmann::json;

class Reader : public nlohmann::json_sax<json> {
 public:
  explicit Reader(TokenizerJson& out) : out_(out) {}

  bool null() override { return scalar(json(nullptr)); }
  bool boolean(bool v) override { return scalar(json(v)); }
  bool number_integer(number_integer_t v) override {
    if (mode_ == Mode::kVocab && skip_depth_ == 0) return vocab_value(v);
    return scalar(json(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == Mode::kVocab && skip_depth_ == 0) {
      return vocab_value(v > static_cast<uint64_t>(INT64_MAX) ? -1 : static_cast<int64_t>(v));
    }
    return scalar(json(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return scalar(json(v)); }
  bool binary(binary_t&) override { return scalar(json(nullptr)); }
  bool string(string_t& v) override {
    if (mode_ == Mode::kMerges && skip_depth_ == 0) {
      const uint32_t off = append(v);
      if (item_depth_ == 0) {
        out_.merges.push_back(
            {RawMerge::Form::kString, off, static_cast<uint32_t>(v.size()), 0, 0});
      } else if (item_strings_ < 2) {
        RawMerge& m = out_.merges.back();
        (item_strings_ == 0 ? m.a_offset : m.b_offset) = off;
        (item_strings_ == 0 ? m.a_length : m.b_length) = static_cast<uint32_t>(v.size());
        ++item_strings_;
      } else {
        out_.merges.back().form = RawMerge::Form::kInvalid;  // more than two
      }
      return true;
    }
    return scalar(json(std::move(v)));
  }

  bool start_object(std::size_t) override {
    if (capturing()) return enter_nested();
    if (at_model_key("vocab")) {
      mode_ = Mode::kVocab;
      out_.vocab_captured = true;
      return place(json::object()) != nullptr;  // a placeholder, so "vocab" is present
    }
    json* p = place(json::object());
    if (stack_.size() == 1 && key_ == "model") model_ = p;
    stack_.push_back(p);
    return true;
  }
  bool start_array(std::size_t) override {
    if (capturing()) return enter_nested();
    if (at_model_key("merges")) {
      mode_ = Mode::kMerges;
      out_.merges_captured = true;
      return place(json::array()) != nullptr;
    }
    stack_.push_back(place(json::array()));
    return true;
  }
  bool end_object() override { return end_container(); }
  bool end_array() override { return end_container(); }
  bool key(string_t& k) override {
    if (mode_ == Mode::kVocab && skip_depth_ == 0) {
      pending_key_offset_ = append(k);
      pending_key_length_ = static_cast<uint32_t>(k.size());
      return true;
    }
    if (capturing()) return true;
    key_ = k;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    error_ = "not valid JSON at byte " + std::to_string(position) + ": " + ex.what();
    return false;
  }
  const std::string& error() const { return error_; }

 private:
  enum class Mode { kDom, kVocab, kMerges };

  bool capturing() const { return mode_ != Mode::kDom; }
  bool at_model_key(std::string_view name) const {
    return model_ != nullptr && stack_.size() == 2 && stack_.back() == model_ && key_ == name;
  }
  uint32_t append(const std::string& s) {
    const auto off = static_cast<uint32_t>(out_.arena.size());
    out_.arena += s;
    return off;
  }

  // A container inside vocab or merges: a merge item ["a", "b"], or something invalid whose
  // contents are skipped.
  bool enter_nested() {
    if (mode_ == Mode::kMerges && skip_depth_ == 0 && item_depth_ == 0) {
      out_.merges.push_back({RawMerge::Form::kPair, 0, 0, 0, 0});
      item_depth_ = 1;
      item_strings_ = 0;
      return true;
    }
    if (skip_depth_ == 0) mark_invalid();
    ++skip_depth_;
    return true;
  }
  bool end_container() {
    if (skip_depth_ > 0) {
      --skip_depth_;
      return true;
    }
    if (mode_ == Mode::kMerges && item_depth_ == 1) {
      if (item_strings_ != 2) out_.merges.back().form = RawMerge::Form::kInvalid;
      item_depth_ = 0;
      return true;
    }
    if (capturing()) {
      mode_ = Mode::kDom;
      return true;
    }
    stack_.pop_back();
    return true;
  }
  void mark_invalid() {
    if (mode_ == Mode::kVocab) {
      vocab_value(-1);
    } else if (item_depth_ == 0) {
      out_.merges.push_back({RawMerge::Form::kInvalid, 0, 0, 0, 0});
    } else {
      out_.merges.back().form = RawMerge::Form::kInvalid;
    }
  }
  bool vocab_value(int64_t id) {
    out_.vocab.push_back({pending_key_offset_, pending_key_length_, id < 0 ? -1 : id});
    return true;
  }
  bool scalar(json v) {
    if (capturing()) {
      if (skip_depth_ == 0) mark_invalid();
      return true;
    }
    place(std::move(v));
    return true;
  }
  // Puts a value where the parse is: the root, the end of an array, or the pending key.
  json* place(json v) {
    if (stack_.empty()) {
      out_.root = std::move(v);
      return &out_.root;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    json& slot = top[key_];
    slot = std::move(v);
    return &slot;
  }

  TokenizerJson& out_;
  std::vector<json*> stack_;  // open containers of the DOM
  std::string key_;           // the last key read outside vocab/merges
  json* model_ = nullptr;     // root["model"] once opened
  Mode mode_ = Mode::kDom;
  int skip_depth_ = 0;  // nesting inside an invalid vocab value or merge item
  int item_depth_ = 0;  // 1 inside a merge item array
  int item_strings_ = 0;
  uint32_t pending_key_offset_ = 0;
  uint32_t pending_key_length_ = 0;
  std::string error_;
};

}  // namespace

Result<TokenizerJson> read_tokenizer_json(std::string_view text) {
  TokenizerJson out;
  out.arena.reserve(text.size() / 3);
  Reader reader(out);
  bool ok = false;
  try {
    ok = json::sax_parse(text.begin(), text.end(), &reader);
  } catch (const json::exception& e) {
    return make_error(ErrorCode::kParse, std::string("not valid JSON: ") + e.what());
  }
  if (!ok) {
    return make_error(ErrorCode::kParse,
                      reader.error().empty() ? "not valid JSON" : reader.error());
  }
  return out;
}

}  // namespace infer::tok
