// The store's association keys and scoring fields, mirrored in memory as one contiguous array
// (EpisodicMemory keeps it in step with every commit): a turn's recall scores every episode, and
// reading the keys out of their records in the mapped file touches pages spread over the whole
// file (the records of 10,000 episodes span hundreds of MB), which cost more than the scoring.
// Beside the fp32 keys, their 16-bit codes (key_codes.h): recall's first pass reads those, half
// the bytes in integer dots, and rescores in fp32 only the keys that can still be among the best.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "memory/episode_store.h"
#include "memory/key_codes.h"

namespace infer::memory {

// The largest error and norm of a key's coded parts (each rounded up), for the bound.
struct KeyBound {
  float err_norm = 0;  // max over parts of ||x - s c||
  float norm = 0;      // max over parts of ||s c|| + ||x - s c|| (at least ||x||)
};

class KeyIndex {
 public:
  // key_floats = parts * part_floats (an association key: sub_spans parts of dims floats).
  KeyIndex(size_t key_floats, size_t part_floats);

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

  // The codes exist when a part is small enough to code (code_limit).
  bool coded() const { return coded_; }
  size_t parts() const { return parts_; }
  size_t part_floats() const { return d_; }
  // Key i's codes [parts * part_floats], keys contiguous; its scales [parts].
  const int16_t* codes(size_t i) const { return codes_.data() + i * k_; }
  const float* scales(size_t i) const { return scales_.data() + i * parts_; }
  const KeyBound& bound(size_t i) const { return bounds_[i]; }

 private:
  size_t k_, d_, parts_;
  bool coded_;
  std::vector<EpisodeInfo> info_;
  std::vector<float> keys_;      // [size() * k_]
  std::vector<int16_t> codes_;   // [size() * k_] when coded_
  std::vector<float> scales_;    // [size() * parts_] when coded_
  std::vector<KeyBound> bounds_; // [size()] when coded_
  std::unordered_map<uint64_t, size_t> at_;
};

}  // namespace infer::memory
