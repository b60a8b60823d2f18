// TokenizerData: the parts of a loaded tokenizer.json, shared by parsing (tokenizer_json.cpp),
// encode/decode (tokenizer.cpp) and the streaming decoder. Internal to model/tokenizer/.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "model/tokenizer/added_tokens.h"
#include "model/tokenizer/bpe.h"
#include "model/tokenizer/decoder.h"
#include "model/tokenizer/normalizer.h"
#include "model/tokenizer/pre_tokenizer.h"
#include "model/tokenizer/token_table.h"
#include "model/tokenizer/tokenizer.h"

namespace infer::tok {

struct TokenizerData {
  BpeModel model;
  // Added tokens in file order; the matchers point into this vector, so it never moves (it
  // lives behind Tokenizer's unique_ptr).
  std::vector<AddedToken> added;
  TokenTable added_vocab;            // content <-> id of the added tokens
  AddedTokenMatcher raw_matcher;     // tokens with normalized=false, matched on raw text
  AddedTokenMatcher normed_matcher;  // tokens with normalized=true, on normalized text
  // The same without the special tokens: for text that must not produce control tokens.
  AddedTokenMatcher raw_plain_matcher;
  AddedTokenMatcher normed_plain_matcher;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  Decoder decoder;
  std::vector<int32_t> prefix_ids;  // TemplateProcessing "single": tokens before $A
  std::vector<int32_t> suffix_ids;  //   and after it
  std::vector<bool> special;        // by id
  int32_t vocab_size = 0;

  // The token text of `id` (added tokens first, as HF), or false when no token has that id.
  bool token_of(int32_t id, std::string_view& text) const {
    if (added_vocab.has_id(id)) {
      text = added_vocab.token(id);
      return true;
    }
    if (model.vocab.has_id(id)) {
      text = model.vocab.token(id);
      return true;
    }
    return false;
  }
};

}  // namespace infer::tok
