// Reads tokenizer.json in one SAX pass: a DOM for the small parts, while model.vocab (262,144
// entries) and model.merges (514,906) go straight into flat arrays, which is several times
// faster than nlohmann's DOM (a std::map node and strings per entry).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace infer::tok {

struct RawVocabEntry {
  uint32_t key_offset;
  uint32_t key_length;
  int64_t id;  // -1 when the value was not a non-negative integer
};

// One merge as written: ["a", "b"] or "a b" (kept whole; split later), or something invalid.
struct RawMerge {
  enum class Form : uint8_t { kPair, kString, kInvalid } form;
  uint32_t a_offset, a_length;
  uint32_t b_offset, b_length;  // kPair only
};

struct TokenizerJson {
  nlohmann::json root;           // everything except model.vocab / model.merges when captured below
  bool vocab_captured = false;   // model.vocab was an object: see vocab
  bool merges_captured = false;  // model.merges was an array: see merges
  std::string arena;             // the bytes of vocab keys and merge strings
  std::vector<RawVocabEntry> vocab;
  std::vector<RawMerge> merges;

  std::string_view bytes(uint32_t offset, uint32_t length) const {
    return std::string_view(arena).substr(offset, length);
  }
};

// Parses `text`; a syntax error becomes an Error with its byte position.
Result<TokenizerJson> read_tokenizer_json(std::string_view text);

}  // namespace infer::tok
