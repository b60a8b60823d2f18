// The CPU KV cache (GEMMA4_TEXT.md §5), in one of two modes:
// - exact: per layer that computes K/V, K (after k_norm and RoPE) and V (after v_norm) as f32
//   rings; sliding layers keep W-1 positions, full layers max_positions;
// - ring (DESIGN.md §4, plan from KvRing): K stored before RoPE. Full layers hold the
//   [anchors | window | recall] slots, sliding layers their own W-1 window. Each chunk gathers
//   the keys it attends into cache-position order, rotated at those positions, with their V.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/config.h"
#include "model/kv_ring.h"
#include "model/kv_ring_api.h"
#include "model/ops/attention.h"

namespace infer {

class KvCache final : public KvRows {
 public:
  // Exact mode. Allocates every ring and chunk buffer; nothing is allocated afterwards.
  KvCache(const ModelConfig& cfg, int64_t max_positions, int64_t max_chunk);
  // Ring mode, planned by `ring` (which must outlive the cache). max_chunk <= ring.max_chunk().
  KvCache(const ModelConfig& cfg, const KvRing& ring, int64_t max_chunk);

  bool ring_mode() const { return ring_ != nullptr; }

  // This chunk's K/V of `layer`: [max_chunk, n_kv, d] f32. Donors have their own buffers (their
  // shared layers read them later in the same forward, §5); other layers share one pair.
  float* chunk_k(int layer) { return chunk_k_[size_t(layer)]; }
  float* chunk_v(int layer) { return chunk_v_[size_t(layer)]; }

  // The position RoPE gives the chunk's first query on `layer` (a layer computing K/V, or a
  // shared layer's donor): pos0 in exact mode; in ring mode the number of keys the chunk
  // attends besides its own (full: the plan's n_keys; sliding: the cached window).
  int64_t query_pos(int layer, int64_t pos0) const;

  // Ring mode, a layer computing K/V, after its chunk K/V are written: gathers its cached keys
  // into cache positions 0.., rotated there, with their V, and the chunk's keys rotated at
  // query_pos. cos, sin: [positions, d/2] RoPE tables from position 0 (§4.6).
  void gather(int layer, int64_t pos0, int64_t T, const float* cos, const float* sin);

  // What `layer` (one that computes K/V) attends over for a chunk starting at pos0. Exact: its
  // ring holding positions [pos0 - slots, pos0) and the chunk buffers. Ring: the gathered keys
  // at positions [0, query_pos) and the rotated chunk.
  KvView view(int layer, int64_t pos0) const;

  // Stores the chunk's T positions pos0.. (exact: keeping the last `slots`; ring: at the plan's
  // write slots on full layers, pos % slots on sliding ones).
  void commit(int layer, int64_t pos0, int64_t T);

  int64_t slots(int layer) const { return layers_[size_t(layer)].slots; }
  size_t bytes() const;

  // KvRows (ring mode): the full layers computing K/V.
  std::span<const int> tiered_layers() const override { return tiered_; }
  int64_t row_floats(int layer) const override { return layers_[size_t(layer)].row; }
  void read_row(int layer, int32_t slot, float* k, float* v) const override;
  void write_row(int layer, int32_t slot, const float* k, const float* v);

  // Every row of every layer set to pseudo-random values in [-1, 1] (benchmarks: the state of a
  // long stream without running it; attention's cost does not depend on the values).
  void fill_synthetic(uint64_t seed);

 private:
  struct Layer {
    int64_t slots = 0;        // ring size; 0 for KV-shared layers (they own no cache)
    int64_t row = 0;          // floats per position: n_kv * d
    int64_t d = 0, n_kv = 0;  // head dim, KV heads
    bool tiered = false;      // ring mode: a full layer holding [anchors | window | recall]
    std::vector<float> k, v;  // [slots, n_kv, d]
    std::vector<float> own_chunk_k, own_chunk_v;  // donors only: [max_chunk, n_kv, d]
    // Ring mode, donors only: gathered K (rotated) and V [slots, row], rotated chunk K [C, row].
    std::vector<float> own_gk, own_gv, own_ck;
  };
  void allocate(const ModelConfig& cfg, int64_t max_positions, int64_t max_chunk);

  const KvRing* ring_ = nullptr;
  std::vector<Layer> layers_;
  std::vector<int> tiered_;
  std::vector<float> shared_chunk_k_, shared_chunk_v_;  // non-donors: [max_chunk, max row]
  std::vector<float> shared_gk_, shared_gv_, shared_ck_;  // ring mode, non-donors
  std::vector<float*> chunk_k_, chunk_v_, gk_, gv_, ck_;  // [L]
};

}  // namespace infer
