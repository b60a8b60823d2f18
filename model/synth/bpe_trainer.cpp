// Deterministic BPE training over word counts (the demo tokenizer's merges).
#include "model/synth/bpe_trainer.h"

#include <map>
#include <set>
#include <unordered_map>

namespace infer {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 "▁"

size_t utf8_length(unsigned char lead) {
  if (lead >= 0xF0 && lead < 0xF8) return 4;
  if (lead >= 0xE0) return lead < 0xF0 ? 3 : 1;
  if (lead >= 0xC0) return 2;
  return 1;
}

// Word -> count. A word begins at every "▁" (MergedWithPrevious keeps the space with what
// follows it once the normalizer has run) and newline runs stand alone.
std::map<std::string, size_t> count_words(std::string_view text) {
  std::map<std::string, size_t> counts;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) ++counts[word];
    word.clear();
  };
  for (const std::string& c : utf8_chars(text)) {
    const bool newline = c == "\n";
    if (c == kSpace || (newline && (word.empty() || word.back() != '\n')) ||
        (!newline && !word.empty() && word.back() == '\n')) {
      flush();
    }
    word += c;
  }
  flush();
  return counts;
}

struct Word {
  std::vector<std::string> symbols;
  size_t count = 0;
};

using Pair = std::pair<std::string, std::string>;

struct PairHash {
  size_t operator()(const Pair& p) const {
    return std::hash<std::string>()(p.first) * 31 + std::hash<std::string>()(p.second);
  }
};

// The most frequent pair; ties go to the smaller concatenation, then the smaller left part.
bool best_pair(const std::vector<Word>& words, Pair* best) {
  std::unordered_map<Pair, size_t, PairHash> counts;
  for (const Word& w : words) {
    for (size_t i = 0; i + 1 < w.symbols.size(); ++i) {
      counts[{w.symbols[i], w.symbols[i + 1]}] += w.count;
    }
  }
  size_t best_count = 1;  // a pair must occur at least twice
  bool found = false;
  for (const auto& [pair, count] : counts) {
    if (count < best_count) continue;
    const std::string joined = pair.first + pair.second;
    const std::string best_joined = found ? best->first + best->second : std::string();
    if (!found || count > best_count || joined < best_joined ||
        (joined == best_joined && pair.first < best->first)) {
      *best = pair;
      best_count = count;
      found = true;
    }
  }
  return found && best_count >= 2;
}

void apply_merge(const Pair& pair, std::vector<Word>* words) {
  for (Word& w : *words) {
    std::vector<std::string> out;
    out.reserve(w.symbols.size());
    for (size_t i = 0; i < w.symbols.size(); ++i) {
      if (i + 1 < w.symbols.size() && w.symbols[i] == pair.first &&
          w.symbols[i + 1] == pair.second) {
        out.push_back(pair.first + pair.second);
        ++i;
      } else {
        out.push_back(w.symbols[i]);
      }
    }
    w.symbols = std::move(out);
  }
}

}  // namespace

std::vector<std::string> utf8_chars(std::string_view s) {
  std::vector<std::string> chars;
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_length(static_cast<unsigned char>(s[i]));
    if (i + n > s.size()) n = 1;
    chars.emplace_back(s.substr(i, n));
    i += n;
  }
  return chars;
}

BpeTraining train_bpe(std::string_view normalized_text, size_t max_merges) {
  BpeTraining result;
  std::set<std::string> alphabet;
  std::vector<Word> words;
  for (const auto& [text, count] : count_words(normalized_text)) {
    Word w{utf8_chars(text), count};
    alphabet.insert(w.symbols.begin(), w.symbols.end());
    words.push_back(std::move(w));
  }
  result.alphabet.assign(alphabet.begin(), alphabet.end());
  Pair pair;
  while (result.merges.size() < max_merges && best_pair(words, &pair)) {
    apply_merge(pair, &words);
    result.merges.push_back(pair);
  }
  return result;
}

}  // namespace infer
