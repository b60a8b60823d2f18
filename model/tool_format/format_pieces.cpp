// Markers to ids, texts to ids with no marker matched in them.
#include "model/tool_format/format_pieces.h"

#include <algorithm>
#include <optional>

#include "model/tool_format/tool_tokens.h"

namespace infer {

void FormatPieces::text(std::string_view t) {
  if (t.empty()) return;
  if (pieces_.empty() || pieces_.back().marker) pieces_.push_back({false, std::string()});
  pieces_.back().text.append(t);
}

void FormatPieces::append(const FormatPieces& other) {
  for (const FormatPiece& p : other.pieces_) {
    if (p.marker) {
      marker(p.text);
    } else {
      text(p.text);
    }
  }
}

std::string FormatPieces::str() const {
  std::string out;
  for (const FormatPiece& p : pieces_) out += p.text;
  return out;
}

std::vector<int32_t> encode_unmarked(const Tokenizer& tok, std::string_view text) {
  // A cut after the first byte of every occurrence leaves no part holding a whole marker; the
  // parts are substrings of the text, so no new occurrence can appear. Only the word around a
  // cut tokenizes differently, and only in text that spells a marker.
  std::vector<size_t> cuts;
  for (std::string_view m : kFormatMarkers) {
    for (size_t at = text.find(m); at != std::string_view::npos; at = text.find(m, at + 1)) {
      cuts.push_back(at + 1);
    }
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  cuts.push_back(text.size());
  std::vector<int32_t> ids;
  size_t begin = 0;
  for (size_t end : cuts) {
    if (end == begin) continue;
    const std::vector<int32_t> part =
        tok.encode(text.substr(begin, end - begin), false, SpecialText::kAsText);
    ids.insert(ids.end(), part.begin(), part.end());
    begin = end;
  }
  return ids;
}

Result<std::vector<int32_t>> encode_pieces(const Tokenizer& tok, const FormatPieces& pieces) {
  std::vector<int32_t> ids;
  for (const FormatPiece& p : pieces.pieces()) {
    if (!p.marker) {
      const std::vector<int32_t> part = encode_unmarked(tok, p.text);
      ids.insert(ids.end(), part.begin(), part.end());
      continue;
    }
    const std::optional<int32_t> id = tok.token_to_id(p.text);
    if (!id) {
      return make_error(ErrorCode::kNotFound,
                        "tokenizer has no token " + p.text + " (Gemma 4's tool format)");
    }
    ids.push_back(*id);
  }
  return ids;
}

}  // namespace infer
