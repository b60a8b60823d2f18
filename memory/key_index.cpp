#include "memory/key_index.h"

#include <algorithm>

namespace infer::memory {

void KeyIndex::load(const EpisodeStore& store) {
  info_.clear();
  keys_.clear();
  at_.clear();
  info_.reserve(store.size());
  keys_.reserve(store.size() * k_);
  store.for_each_key([&](const EpisodeInfo& info, std::span<const float> key) { put(info, key); });
}

void KeyIndex::put(const EpisodeInfo& info, std::span<const float> key) {
  at_[info.id] = info_.size();
  info_.push_back(info);
  info_.back().preview.clear();
  keys_.insert(keys_.end(), key.begin(), key.begin() + std::min(key.size(), k_));
  keys_.resize(info_.size() * k_, 0.0f);
}

// The last entry moves into the hole (order does not matter: recall sorts by score).
void KeyIndex::remove(uint64_t id) {
  const auto it = at_.find(id);
  if (it == at_.end()) return;
  const size_t i = it->second, last = info_.size() - 1;
  at_.erase(it);
  if (i != last) {
    info_[i] = std::move(info_[last]);
    std::copy_n(keys_.begin() + std::ptrdiff_t(last * k_), k_, keys_.begin() + std::ptrdiff_t(i * k_));
    at_[info_[i].id] = i;
  }
  info_.pop_back();
  keys_.resize(info_.size() * k_);
}

void KeyIndex::touch(uint64_t id, float strength, int64_t recalled_ms, uint32_t recalls) {
  const auto it = at_.find(id);
  if (it == at_.end()) return;
  EpisodeInfo& i = info_[it->second];
  i.strength = strength;
  i.recalled_ms = recalled_ms;
  i.recalls = recalls;
}

}  // namespace infer::memory
