#include "cli/chat_prompt.h"

namespace infer::cli {
namespace {

void add_markers(const Tokenizer& tok, std::string_view markers, std::vector<int32_t>& out) {
  const std::vector<int32_t> ids = tok.encode(markers, false, SpecialText::kMatch);
  out.insert(out.end(), ids.begin(), ids.end());
}

void add_text(const Tokenizer& tok, std::string_view text, bool special,
              std::vector<int32_t>& out) {
  const std::vector<int32_t> ids =
      tok.encode(text, false, special ? SpecialText::kMatch : SpecialText::kAsText);
  out.insert(out.end(), ids.begin(), ids.end());
}

void add_bos(const Tokenizer& tok, std::vector<int32_t>& out) {
  if (tok.bos_id() >= 0) out.push_back(tok.bos_id());
}

void add_system(const Tokenizer& tok, std::string_view system, bool special,
                std::vector<int32_t>& out) {
  add_markers(tok, "<|turn>system\n", out);
  add_text(tok, system, special, out);
  add_markers(tok, "<turn|>\n", out);
}

}  // namespace

std::vector<int32_t> chat_turn_ids(const Tokenizer& tok, const ChatTurn& turn) {
  std::vector<int32_t> out;
  if (turn.opens_context) {
    add_bos(tok, out);
    if (turn.system != nullptr && turn.system->has_value()) {
      add_system(tok, **turn.system, turn.special, out);
    }
  } else if (turn.closes_model_turn) {
    add_markers(tok, "<turn|>\n", out);
  }
  add_markers(tok, "<|turn>user\n", out);
  add_text(tok, turn.user, turn.special, out);
  add_markers(tok, "<turn|>\n<|turn>model\n", out);
  return out;
}

std::vector<int32_t> system_preamble_ids(const Tokenizer& tok, std::string_view system,
                                         bool special) {
  std::vector<int32_t> out;
  add_bos(tok, out);
  add_system(tok, system, special, out);
  return out;
}

}  // namespace infer::cli
