// Added-token matching: HF tokenizers added_vocabulary.rs find_matches, on a byte trie.
#include "model/tokenizer/added_tokens.h"

#include <cctype>

#include "model/tokenizer/utf8.h"

namespace infer::tok {
namespace {

// HF's single_word test uses regex \w: letters, digits, underscore. Non-ASCII characters other
// than whitespace count as word characters, which holds for letters and is what the fixtures
// need (no Gemma added token is single_word).
bool is_word_char(uint32_t cp) {
  if (cp < 0x80) return std::isalnum(static_cast<int>(cp)) != 0 || cp == '_';
  return !is_unicode_whitespace(cp);
}

// Start of the character that ends at s[end - 1] (a lone byte when the UTF-8 there is broken).
size_t prev_char_start(std::string_view s, size_t end) {
  size_t i = end - 1;
  while (i > 0 && end - i < 4 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return utf8_char_len(s, i) == end - i ? i : end - 1;
}

uint32_t last_char(std::string_view s) {
  const size_t i = prev_char_start(s, s.size());
  return utf8_decode(s.data() + i, s.size() - i);
}

uint32_t first_char(std::string_view s) { return utf8_decode(s.data(), utf8_char_len(s, 0)); }

}  // namespace

void AddedTokenMatcher::add(std::string_view content, const AddedToken* token) {
  if (content.empty()) return;  // HF never matches an empty token
  int32_t node = 0;
  for (char c : content) {
    const auto byte = static_cast<unsigned char>(c);
    int32_t next = child(node, byte);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_.emplace_back();
      edges_.emplace((static_cast<uint64_t>(node) << 8) | byte, next);
    }
    node = next;
  }
  if (nodes_[node].token == nullptr) nodes_[node].token = token;  // first of duplicates wins
  first_byte_[static_cast<unsigned char>(content[0])] = true;
}

const AddedToken* AddedTokenMatcher::longest_at(std::string_view text, size_t pos,
                                                size_t& end) const {
  const AddedToken* best = nullptr;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    node = child(node, static_cast<unsigned char>(text[i]));
    if (node < 0) break;
    if (nodes_[node].token != nullptr) {
      best = nodes_[node].token;
      end = i + 1;
    }
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<TextSplit>& out) const {
  size_t done = 0;  // text before this is already in `out`
  size_t pos = 0;
  while (pos < text.size()) {
    size_t stop = 0;
    const AddedToken* tok = nullptr;
    if (first_byte_[static_cast<unsigned char>(text[pos])]) tok = longest_at(text, pos, stop);
    if (tok == nullptr) {
      ++pos;
      continue;
    }
    size_t start = pos;
    if (tok->single_word) {
      const bool space_before = start == 0 || !is_word_char(last_char(text.substr(0, start)));
      const bool space_after = stop == text.size() || !is_word_char(first_char(text.substr(stop)));
      if (!space_before || !space_after) {
        ++pos;
        continue;
      }
    }
    if (tok->lstrip) {
      // HF strips back to the previous non-whitespace, but never into the previous split.
      while (start > done && is_unicode_whitespace(last_char(text.substr(0, start)))) {
        start = prev_char_start(text, start);
      }
    }
    if (tok->rstrip) {
      while (stop < text.size()) {
        const size_t len = utf8_char_len(text, stop);
        if (!is_unicode_whitespace(utf8_decode(text.data() + stop, len))) break;
        stop += len;
      }
    }
    if (done < start) out.push_back({-1, done, start});
    out.push_back({tok->id, start, stop});
    done = pos = stop;
  }
  if (done < text.size()) out.push_back({-1, done, text.size()});
}

}  // namespace infer::tok
