// Added tokens (tokenizer.json "added_tokens"): found in the text before the model sees it, by
// leftmost-longest match as HF's AddedVocabulary does, with its single_word/lstrip/rstrip rules.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace infer::tok {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

// A piece of text: an added token's id, or (id -1) a byte range still to be tokenized.
struct TextSplit {
  int32_t id;
  size_t begin;
  size_t end;
};

// A byte trie over a set of added tokens' contents.
class AddedTokenMatcher {
 public:
  void add(std::string_view content, const AddedToken* token);
  bool empty() const { return nodes_.size() <= 1; }
  // Splits `text` into added tokens and the ranges between them (ranges are never empty).
  void split(std::string_view text, std::vector<TextSplit>& out) const;

 private:
  struct Node {
    const AddedToken* token = nullptr;  // the token ending here, if any
  };
  // Longest token starting at text[pos]: its node's token and end, or nullptr.
  const AddedToken* longest_at(std::string_view text, size_t pos, size_t& end) const;
  int32_t child(int32_t node, unsigned char byte) const {
    const auto it = edges_.find((static_cast<uint64_t>(node) << 8) | byte);
    return it == edges_.end() ? -1 : it->second;
  }

  std::vector<Node> nodes_ = std::vector<Node>(1);  // node 0 is the root
  std::unordered_map<uint64_t, int32_t> edges_;     // (node << 8 | byte) -> child node
  bool first_byte_[256] = {};                       // a cheap filter before the trie walk
};

}  // namespace infer::tok
