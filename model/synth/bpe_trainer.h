// A small byte-pair-encoding trainer for the demo tokenizer: learns merges from a text the way
// Hugging Face's BpeTrainer does (most frequent adjacent pair first), deterministically.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace infer {

struct BpeTraining {
  std::vector<std::string> alphabet;  // every UTF-8 character of the text, sorted by bytes
  std::vector<std::pair<std::string, std::string>> merges;  // in the order learned
};

// Splits a normalized text (spaces already "▁") into words: a word starts at each "▁" and each
// run of newlines is a word of its own, so no merge crosses a word boundary. Learns up to
// max_merges merges; stops early when no pair occurs twice. Ties between equally frequent pairs
// go to the pair whose concatenation sorts first, then its left part, so the result is fixed.
BpeTraining train_bpe(std::string_view normalized_text, size_t max_merges);

// The UTF-8 characters of `s` in order (an invalid lead byte counts as one character).
std::vector<std::string> utf8_chars(std::string_view s);

}  // namespace infer
