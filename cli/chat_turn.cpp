// Builds a chat turn's ids piece by piece: markers (kMatch) and the texts between them.
#include "cli/chat_turn.h"

#include <optional>
#include <string>

namespace infer::cli {
namespace {

class TurnBuilder {
 public:
  TurnBuilder(const Tokenizer& tok, SpecialText text_mode) : tok_(tok), text_mode_(text_mode) {}

  void id(int32_t id) {
    flush();
    ids_.push_back(id);
  }
  // A chat marker such as "<|turn>": its added token when the tokenizer has it.
  void marker(std::string_view m) {
    flush();
    append(tok_.encode(m, false, SpecialText::kMatch));
  }
  // Text joins the text run since the last marker, encoded at the next marker.
  void text(std::string_view t) { run_.append(t); }
  std::vector<int32_t> finish() {
    flush();
    return std::move(ids_);
  }

 private:
  void flush() {
    if (run_.empty()) return;
    append(tok_.encode(run_, false, text_mode_));
    run_.clear();
  }
  void append(const std::vector<int32_t>& ids) { ids_.insert(ids_.end(), ids.begin(), ids.end()); }

  const Tokenizer& tok_;
  SpecialText text_mode_;
  std::string run_;
  std::vector<int32_t> ids_;
};

void open_context(TurnBuilder& b, const Tokenizer& tok, std::optional<std::string_view> system) {
  if (tok.bos_id() >= 0) b.id(tok.bos_id());
  if (system) {
    b.marker("<|turn>");
    b.text("system\n");
    b.text(*system);
    b.marker("<turn|>");
    b.text("\n");
  }
}

}  // namespace

std::vector<int32_t> system_turn_ids(const Tokenizer& tok, std::string_view system,
                                     bool special) {
  TurnBuilder b(tok, special ? SpecialText::kMatch : SpecialText::kAsText);
  open_context(b, tok, system);
  return b.finish();
}

std::vector<int32_t> chat_turn_ids(const Tokenizer& tok, std::string_view user,
                                   const ChatTurnSpec& spec) {
  TurnBuilder b(tok, spec.special ? SpecialText::kMatch : SpecialText::kAsText);
  if (spec.opens_context) {
    open_context(b, tok, spec.system);
  } else {
    b.marker("<turn|>");
    b.text("\n");
  }
  b.marker("<|turn>");
  b.text("user\n");
  b.text(user);
  b.marker("<turn|>");
  b.text("\n");
  b.marker("<|turn>");
  b.text("model\n");
  return b.finish();
}

}  // namespace infer::cli
