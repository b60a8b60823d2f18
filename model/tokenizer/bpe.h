// The BPE model of tokenizer.json: vocabulary, merge ranks, byte fallback, unk, ignore_merges.
// tokenize() is HF's BPE::merge_word + Word::merge_all: lowest rank first, leftmost on ties.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "model/tokenizer/token_table.h"

namespace infer::tok {

// (left id, right id) -> (rank, merged id), open addressing on the packed pair.
class MergeTable {
 public:
  struct Value {
    uint32_t rank;
    int32_t new_id;
  };
  void reserve(size_t n_merges);
  // A later merge of the same pair replaces the earlier one, as HF's HashMap collect does.
  void insert(int32_t left, int32_t right, uint32_t rank, int32_t new_id);
  const Value* find(int32_t left, int32_t right) const {
    const uint64_t key = pack(left, right);
    for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == kEmpty) return nullptr;
    }
  }
  size_t size() const { return count_; }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  struct Slot {
    uint64_t key = kEmpty;
    Value value{};
  };
  static uint64_t pack(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  size_t slot_of(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }

  std::vector<Slot> slots_ = std::vector<Slot>(1);
  size_t mask_ = 0;
  int shift_ = 63;  // slot_of uses the top bits; with one slot it must give 0
  size_t count_ = 0;
};

// Per-call working memory of tokenize(), reused across the pieces of one encode(): the merge
// loop's buffers and a cache of words already tokenized (prose repeats its words).
struct BpeScratch {
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return hash_bytes(s); }
  };
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>, Hash, std::equal_to<>> cache;
  std::vector<int32_t> cached_ids;  // cache values are [offset, count) ranges of this
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    uint32_t len;  // bytes covered; 0 marks a symbol merged into its left neighbour
  };
  struct Merge {
    uint32_t rank;
    uint32_t pos;
    int32_t new_id;
    int32_t left;  // the pair when queued: if still the same, the merge is valid as is
    int32_t right;
  };
  std::vector<Symbol> symbols;
  std::vector<Merge> heap;
};

struct BpeModel {
  TokenTable vocab;
  MergeTable merges;
  int32_t unk_id = -1;  // -1: no unk_token, unknown characters are dropped (as HF)
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
  int32_t byte_ids[256];  // <0xNN> token ids, -1 where the vocab lacks one

  // Call once the vocab is complete: fills byte_ids, the single-character fast table and the
  // word-boundary analysis behind split_at_marker_.
  void index_characters();
  // Appends the ids of one pre-tokenized piece (normalized bytes) to `out`.
  void tokenize(std::string_view word, BpeScratch& scratch, std::vector<int32_t>& out) const;

 private:
  int32_t char_id(std::string_view ch) const;
  void push_symbols(std::string_view word, BpeScratch& scratch) const;
  bool is_boundary(std::string_view word, size_t marker_pos) const;
  void merge_word(std::string_view word, BpeScratch& scratch, std::vector<int32_t>& out) const;
  void merge_word_cached(std::string_view word, BpeScratch& scratch,
                         std::vector<int32_t>& out) const;

  std::vector<int32_t> bmp_ids_;  // id of each single-character token below U+10000, else -1
  // Gemma does not pre-split words (its Split on " " runs after " " became "▁"), so a line is
  // one BPE word. Merging within words separately is exact at a "▁" whose preceding character
  // c has a token and no vocab token contains "c▁": no merge can then join the two sides, as
  // every merge yields a vocab token. marker_glue_ holds the c that do occur before a "▁".
  bool split_at_marker_ = false;
  std::unordered_set<uint32_t> marker_glue_;
};

}  // namespace infer::tok
