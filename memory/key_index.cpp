#include "memory/key_index.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"

namespace infer::memory {

KeyIndex::KeyIndex(size_t key_floats, size_t part_floats)
    : k_(key_floats),
      d_(part_floats),
      parts_(part_floats > 0 ? key_floats / part_floats : 0),
      coded_(code_limit(part_floats) > 0) {
  INFER_CHECK(part_floats > 0 && key_floats % part_floats == 0, "key index: part size");
}

void KeyIndex::load(const EpisodeStore& store) {
  info_.clear();
  keys_.clear();
  codes_.clear();
  scales_.clear();
  bounds_.clear();
  at_.clear();
  info_.reserve(store.size());
  keys_.reserve(store.size() * k_);
  if (coded_) {
    codes_.reserve(store.size() * k_);
    scales_.reserve(store.size() * parts_);
    bounds_.reserve(store.size());
  }
  store.for_each_key([&](const EpisodeInfo& info, std::span<const float> key) { put(info, key); });
}

void KeyIndex::put(const EpisodeInfo& info, std::span<const float> key) {
  at_[info.id] = info_.size();
  info_.push_back(info);
  info_.back().preview.clear();
  keys_.insert(keys_.end(), key.begin(), key.begin() + std::min(key.size(), k_));
  keys_.resize(info_.size() * k_, 0.0f);
  if (!coded_) return;
  const float* x = keys_.data() + (info_.size() - 1) * k_;
  codes_.resize(info_.size() * k_);
  int16_t* c = codes_.data() + (info_.size() - 1) * k_;
  KeyBound b;
  for (size_t p = 0; p < parts_; ++p) {
    const PartCode pc = code_part(x + p * d_, d_, c + p * d_);
    scales_.push_back(pc.scale);
    b.err_norm = std::max(b.err_norm, pc.err_norm);
    const float n = pc.coded_norm + pc.err_norm;  // rounded up: at least the exact sum
    b.norm = std::max(b.norm, std::nextafter(n, std::numeric_limits<float>::infinity()));
  }
  bounds_.push_back(b);
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
    if (coded_) {
      std::copy_n(codes_.begin() + std::ptrdiff_t(last * k_), k_,
                  codes_.begin() + std::ptrdiff_t(i * k_));
      std::copy_n(scales_.begin() + std::ptrdiff_t(last * parts_), parts_,
                  scales_.begin() + std::ptrdiff_t(i * parts_));
      bounds_[i] = bounds_[last];
    }
    at_[info_[i].id] = i;
  }
  info_.pop_back();
  keys_.resize(info_.size() * k_);
  if (coded_) {
    codes_.resize(info_.size() * k_);
    scales_.resize(info_.size() * parts_);
    bounds_.pop_back();
  }
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
