// Builds a chat turn's ids piece by piece: markers (kMatch) and the texts between them.
#include "cli/chat_turn.h"

#include <optional>
#include <string>

#include "base/check.h"
#include "model/tool_format/format_pieces.h"

namespace infer::cli {
namespace {

class TurnBuilder {
 public:
  TurnBuilder(const Tokenizer& tok, bool special) : tok_(tok), special_(special) {}

  void id(int32_t id) {
    flush();
    ids_.push_back(id);
  }
  void ids(const std::vector<int32_t>& ids) {
    flush();
    append(ids);
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
  // Without --special no marker spelled in the text becomes its token: encode_unmarked cuts
  // the tool and channel markers too, which SpecialText::kAsText would still match.
  void flush() {
    if (run_.empty()) return;
    append(special_ ? tok_.encode(run_, false, SpecialText::kMatch) : encode_unmarked(tok_, run_));
    run_.clear();
  }
  void append(const std::vector<int32_t>& ids) { ids_.insert(ids_.end(), ids.begin(), ids.end()); }

  const Tokenizer& tok_;
  bool special_;
  std::string run_;
  std::vector<int32_t> ids_;
};

void open_context(TurnBuilder& b, const Tokenizer& tok, std::optional<std::string_view> system,
                  std::span<const ToolDeclaration> tools) {
  if (tok.bos_id() >= 0) b.id(tok.bos_id());
  if (system || !tools.empty()) {
    b.marker("<|turn>");
    b.text("system\n");
    if (system) b.text(*system);
    if (!tools.empty()) {  // system_turn_pieces' layout: the declarations after the text
      Result<FormatPieces> pieces = declarations_pieces(tools);
      INFER_CHECK(pieces.ok(), "a tool declaration: %s", pieces.error().message.c_str());
      Result<std::vector<int32_t>> ids = encode_pieces(tok, *pieces);
      INFER_CHECK(ids.ok(), "the tokenizer's tool markers: %s", ids.error().message.c_str());
      b.ids(*ids);
    }
    b.marker("<turn|>");
    b.text("\n");
  }
}

}  // namespace

std::vector<int32_t> system_turn_ids(const Tokenizer& tok, std::string_view system,
                                     bool special) {
  return system_turn_ids(tok, system, special, {});
}

std::vector<int32_t> system_turn_ids(const Tokenizer& tok, std::string_view system, bool special,
                                     std::span<const ToolDeclaration> tools) {
  TurnBuilder b(tok, special);
  open_context(b, tok, system, tools);
  return b.finish();
}

std::vector<int32_t> chat_turn_ids(const Tokenizer& tok, std::string_view user,
                                   const ChatTurnSpec& spec) {
  TurnBuilder b(tok, spec.special);
  if (spec.opens_context) {
    open_context(b, tok, spec.system, spec.tools);
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
