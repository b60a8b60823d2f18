// A block of Gemma 4's tool format (a declaration, a call, a response) as markers and the texts
// between them, and its ids: each marker is its one added token, and a text never becomes a
// marker, so a string value that spells "<|\"|>" or "<tool_call|>" cannot end the string, the
// call or the turn it sits in (GEMMA4_CHAT.md, Tools and Known traps).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "model/tokenizer/tokenizer.h"

namespace infer {

struct FormatPiece {
  bool marker = false;  // one added token spelled `text` (<|tool_call>, <|"|>, <|turn>, ...)
  std::string text;
};

class FormatPieces {
 public:
  void marker(std::string_view spelling) { pieces_.push_back({true, std::string(spelling)}); }
  // Joins the text since the last marker, so that it is encoded as one run (the ids then equal
  // those of the whole block encoded at once, when no text spells a marker).
  void text(std::string_view t);
  void append(const FormatPieces& other);

  const std::vector<FormatPiece>& pieces() const { return pieces_; }
  // The block as GEMMA4_CHAT.md spells it.
  std::string str() const;

 private:
  std::vector<FormatPiece> pieces_;
};

// Text -> ids with none of kFormatMarkers matched: every occurrence of a marker's spelling is cut
// after its first byte and the parts are encoded with SpecialText::kAsText. Decoding the ids
// gives the text back. Also what user-supplied text next to the format should go through.
std::vector<int32_t> encode_unmarked(const Tokenizer& tok, std::string_view text);

// Markers by their ids, texts through encode_unmarked. kNotFound when the tokenizer lacks a
// marker. tok.decode() of the ids is pieces.str().
Result<std::vector<int32_t>> encode_pieces(const Tokenizer& tok, const FormatPieces& pieces);

}  // namespace infer
