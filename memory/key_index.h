// The store's association keys and scoring fields, mirrored in memory as one contiguous array
// (EpisodicMemory keeps it in step with every commit): a turn's recall scores every episode, and
// reading the keys out of their records in the mapped file touches pages spread over the whole
// file (the records of 10,000 episodes span hundreds of MB), which cost more than the scoring.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "memory/episode_store.h"

namespace infer::memory {

class KeyIndex {
 public:
  explicit KeyIndex(size_t key_floats) : k_(key_floats) {}

  // Everything store holds now (previews are not kept).
  void load(const EpisodeStore& store);
  // A committed episode (info.id set); its preview is dropped.
  void put(const EpisodeInfo& info, std::span<const float> key);
  void remove(uint64_t id);
  // What a recall committed for id (nothing when id is gone).
  void touch(uint64_t id, float strength, int64_t recalled_ms, uint32_t recalls);

  size_t size() const { return info_.size(); }
  const EpisodeInfo& info(size_t i) const { return info_[i]; }
  const float* key(size_t i) const { return keys_.data() + i * k_; }

 private:
  size_t k_;
  std::vector<EpisodeInfo> info_;
  std::vector<float> keys_;  // [size() * k_]
  std::unordered_map<uint64_t, size_t> at_;
};

}  // namespace infer::memory
