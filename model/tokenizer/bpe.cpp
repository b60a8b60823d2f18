// BPE merge loop (HF tokenizers models/bpe: model.rs merge_word, word.rs merge_all) over packed
// id pairs, with a min-heap of candidate merges ordered by (rank, position).
#include "model/tokenizer/bpe.h"

#include <algorithm>
#include <cstdio>

#include "model/tokenizer/utf8.h"

namespace infer::tok {
namespace {

constexpr std::string_view kMarker = "\xE2\x96\x81";  // U+2581 "▁", SentencePiece's space

// Words longer than this are merged without the cache: they rarely repeat.
constexpr size_t kMaxCachedWordBytes = 64;
constexpr size_t kMaxCachedWords = 1 << 16;

}  // namespace

void MergeTable::reserve(size_t n_merges) {
  size_t cap = 16;
  int bits = 4;
  while (cap < n_merges * 2) {  // load factor at most 1/2
    cap *= 2;
    ++bits;
  }
  std::vector<Slot> old;
  old.swap(slots_);
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  shift_ = 64 - bits;
  count_ = 0;
  for (const Slot& s : old) {
    if (s.key != kEmpty) {
      insert(static_cast<int32_t>(s.key >> 32), static_cast<int32_t>(s.key & 0xFFFFFFFFu),
             s.value.rank, s.value.new_id);
    }
  }
}

void MergeTable::insert(int32_t left, int32_t right, uint32_t rank, int32_t new_id) {
  if ((count_ + 1) * 2 > slots_.size()) reserve(count_ + 1);
  const uint64_t key = pack(left, right);
  size_t i = slot_of(key);
  while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
  if (slots_[i].key == kEmpty) ++count_;
  slots_[i] = Slot{key, Value{rank, new_id}};
}

void BpeModel::index_characters() {
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);  // HF's format!("<{b:#04X}>")
    byte_ids[b] = vocab.find(name);
  }
  bmp_ids_.assign(0x10000, -1);
  for (int32_t id = 0; id < vocab.id_limit(); ++id) {
    const std::string_view t = vocab.token(id);
    if (t.empty() || t.size() > 3 || utf8_char_len(t, 0) != t.size()) continue;
    if (t.size() == 1 && static_cast<unsigned char>(t[0]) >= 0x80) continue;  // not a character
    bmp_ids_[utf8_decode(t.data(), t.size())] = id;
  }
  marker_glue_.clear();
  for (int32_t id = 0; id < vocab.id_limit(); ++id) {
    const std::string_view t = vocab.token(id);
    for (size_t at = t.find(kMarker, 1); at != std::string_view::npos;
         at = t.find(kMarker, at + 1)) {
      size_t c = at - 1;
      while (c > 0 && at - c < 4 && (static_cast<unsigned char>(t[c]) & 0xC0) == 0x80) --c;
      if (t.substr(c, at - c) != kMarker) marker_glue_.insert(utf8_decode(t.data() + c, at - c));
    }
  }
  // Worth it only when "▁" starts words: a vocab where most characters glue has few boundaries.
  split_at_marker_ = char_id(kMarker) >= 0 && marker_glue_.size() < 64;
}

bool BpeModel::is_boundary(std::string_view word, size_t at) const {
  size_t c = at - 1;
  while (c > 0 && at - c < 4 && (static_cast<unsigned char>(word[c]) & 0xC0) == 0x80) --c;
  const std::string_view ch = word.substr(c, at - c);
  if (utf8_char_len(word, c) != ch.size() || ch == kMarker) return false;
  return char_id(ch) >= 0 && !marker_glue_.contains(utf8_decode(ch.data(), ch.size()));
}

int32_t BpeModel::char_id(std::string_view ch) const {
  if (ch.size() == 1 && static_cast<unsigned char>(ch[0]) >= 0x80) return -1;  // invalid byte
  if (ch.size() <= 3) return bmp_ids_[utf8_decode(ch.data(), ch.size())];
  return vocab.find(ch);
}

// One symbol per character; a character missing from the vocab becomes its <0xNN> tokens, or
// else unk (fused with a preceding unk when fuse_unk), or is dropped when there is no unk.
void BpeModel::push_symbols(std::string_view word, BpeScratch& scratch) const {
  auto& syms = scratch.symbols;
  syms.clear();
  const auto add = [&syms](int32_t id, size_t len) {
    const auto n = static_cast<int32_t>(syms.size());
    syms.push_back({id, n - 1, n + 1, static_cast<uint32_t>(len)});
  };
  int32_t pending_unk_len = 0;  // bytes of an unk not yet added (so a following one can fuse)
  for (size_t i = 0; i < word.size();) {
    const size_t len = utf8_char_len(word, i);
    const std::string_view ch = word.substr(i, len);
    i += len;
    const int32_t id = char_id(ch);
    if (id >= 0) {
      if (pending_unk_len > 0) add(unk_id, pending_unk_len);
      pending_unk_len = 0;
      add(id, len);
      continue;
    }
    if (byte_fallback) {
      bool all = true;
      for (char c : ch) all = all && byte_ids[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        // As HF: a pending unk stays pending across byte-fallback characters.
        for (char c : ch) add(byte_ids[static_cast<unsigned char>(c)], 1);
        continue;
      }
    }
    if (unk_id < 0) continue;
    if (pending_unk_len > 0 && !fuse_unk) {
      add(unk_id, pending_unk_len);
      pending_unk_len = 0;
    }
    pending_unk_len += static_cast<int32_t>(len);
  }
  if (pending_unk_len > 0) add(unk_id, pending_unk_len);
  if (!syms.empty()) syms.back().next = -1;
}

void BpeModel::tokenize(std::string_view word, BpeScratch& scratch,
                        std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges) {  // HF looks up the whole pre-tokenized piece
    const int32_t id = vocab.find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (!split_at_marker_) {
    merge_word(word, scratch, out);
    return;
  }
  size_t start = 0;
  for (size_t at = word.find(kMarker, 1); at != std::string_view::npos;
       at = word.find(kMarker, at + kMarker.size())) {
    if (at > start && is_boundary(word, at)) {
      merge_word_cached(word.substr(start, at - start), scratch, out);
      start = at;
    }
  }
  merge_word_cached(word.substr(start), scratch, out);
}

void BpeModel::merge_word_cached(std::string_view word, BpeScratch& scratch,
                                 std::vector<int32_t>& out) const {
  if (word.size() > kMaxCachedWordBytes) {
    merge_word(word, scratch, out);
    return;
  }
  const auto hit = scratch.cache.find(word);
  if (hit != scratch.cache.end()) {
    const auto [offset, count] = hit->second;
    out.insert(out.end(), scratch.cached_ids.begin() + offset,
               scratch.cached_ids.begin() + offset + count);
    return;
  }
  const size_t before = out.size();
  merge_word(word, scratch, out);
  if (scratch.cache.size() < kMaxCachedWords) {
    const auto offset = static_cast<uint32_t>(scratch.cached_ids.size());
    scratch.cached_ids.insert(scratch.cached_ids.end(), out.begin() + before, out.end());
    scratch.cache.emplace(word, std::make_pair(offset, static_cast<uint32_t>(out.size() - before)));
  }
}

void BpeModel::merge_word(std::string_view word, BpeScratch& scratch,
                          std::vector<int32_t>& out) const {
  push_symbols(word, scratch);
  auto& syms = scratch.symbols;
  auto& heap = scratch.heap;
  // std heaps are max-heaps: "less" is the lower priority, i.e. higher rank, then later pos.
  const auto lower = [](const BpeScratch::Merge& a, const BpeScratch::Merge& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  heap.clear();
  for (size_t i = 0; i + 1 < syms.size(); ++i) {
    if (const MergeTable::Value* m = merges.find(syms[i].id, syms[i + 1].id)) {
      heap.push_back({m->rank, static_cast<uint32_t>(i), m->new_id, syms[i].id, syms[i + 1].id});
    }
  }
  std::make_heap(heap.begin(), heap.end(), lower);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), lower);
    const BpeScratch::Merge top = heap.back();
    heap.pop_back();
    BpeScratch::Symbol& cur = syms[top.pos];
    if (cur.len == 0 || cur.next < 0) continue;
    BpeScratch::Symbol& right = syms[cur.next];
    // The pair may have changed since it was queued. HF then compares only the merged id
    // (word.rs), so do we, to produce the same tokens in every case.
    if (cur.id != top.left || right.id != top.right) {
      const MergeTable::Value* now = merges.find(cur.id, right.id);
      if (now == nullptr || now->new_id != top.new_id) continue;
    }
    cur.id = top.new_id;
    cur.len += right.len;
    cur.next = right.next;
    right.len = 0;
    if (cur.next >= 0) syms[cur.next].prev = static_cast<int32_t>(top.pos);
    if (cur.prev >= 0) {
      if (const MergeTable::Value* m = merges.find(syms[cur.prev].id, cur.id)) {
        heap.push_back(
            {m->rank, static_cast<uint32_t>(cur.prev), m->new_id, syms[cur.prev].id, cur.id});
        std::push_heap(heap.begin(), heap.end(), lower);
      }
    }
    if (cur.next >= 0) {
      if (const MergeTable::Value* m = merges.find(cur.id, syms[cur.next].id)) {
        heap.push_back({m->rank, top.pos, m->new_id, cur.id, syms[cur.next].id});
        std::push_heap(heap.begin(), heap.end(), lower);
      }
    }
  }
  for (int32_t i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) out.push_back(syms[i].id);
}

}  // namespace infer::tok
