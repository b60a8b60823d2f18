// TokenTable: arena of token bytes plus a linear-probing index (see token_table.h).
#include "model/tokenizer/token_table.h"

#include <cstring>

namespace infer::tok {
namespace {

inline uint64_t mix(uint64_t x) {
  x ^= x >> 32;
  x *= 0xD6E8FEB86659FD93ull;
  x ^= x >> 32;
  return x;
}

}  // namespace

uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w = 0;
    std::memcpy(&w, s.data() + i, 8);
    h = mix(h ^ w) * 0x9E3779B97F4A7C15ull;
  }
  uint64_t tail = 0;
  if (i < s.size()) std::memcpy(&tail, s.data() + i, s.size() - i);
  return mix(h ^ tail ^ (static_cast<uint64_t>(s.size() - i) << 56));
}

void TokenTable::reserve(size_t n_tokens) {
  size_t cap = 16;
  while (cap < n_tokens * 2) cap *= 2;  // load factor at most 1/2 keeps probes short
  if (cap > slots_.size()) {
    slots_.assign(cap, -1);
    for (size_t id = 0; id < spans_.size(); ++id) {
      if (!spans_[id].present) continue;
      size_t i = hash_bytes(token(static_cast<int32_t>(id))) & (cap - 1);
      while (slots_[i] >= 0) i = (i + 1) & (cap - 1);
      slots_[i] = static_cast<int32_t>(id);
    }
  }
  spans_.reserve(n_tokens);
}

void TokenTable::grow_index() { reserve(slots_.empty() ? 8 : slots_.size()); }

bool TokenTable::insert(std::string_view token_bytes, int32_t id) {
  if (id < 0 || has_id(id)) return false;
  if ((count_ + 1) * 2 > slots_.size()) grow_index();
  const size_t mask = slots_.size() - 1;
  size_t i = hash_bytes(token_bytes) & mask;
  for (; slots_[i] >= 0; i = (i + 1) & mask) {
    if (token(slots_[i]) == token_bytes) return false;
  }
  if (static_cast<size_t>(id) >= spans_.size()) spans_.resize(static_cast<size_t>(id) + 1);
  spans_[id] =
      Span{static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(token_bytes.size()), true};
  arena_.append(token_bytes);
  slots_[i] = id;
  ++count_;
  return true;
}

int32_t TokenTable::find(std::string_view token_bytes) const {
  if (slots_.empty()) return -1;
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash_bytes(token_bytes) & mask; slots_[i] >= 0; i = (i + 1) & mask) {
    const Span& sp = spans_[slots_[i]];
    if (sp.length == token_bytes.size() &&
        std::memcmp(arena_.data() + sp.offset, token_bytes.data(), sp.length) == 0) {
      return slots_[i];
    }
  }
  return -1;
}

std::string_view TokenTable::token(int32_t id) const {
  if (!has_id(id)) return {};
  const Span& sp = spans_[id];
  return std::string_view(arena_).substr(sp.offset, sp.length);
}

}  // namespace infer::tok
