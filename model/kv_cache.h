// The CPU KV cache (GEMMA4_TEXT.md §5): per layer that computes K/V, K (after k_norm and RoPE) and
// V (after v_norm) as f32 rings; sliding layers keep W-1 positions, full layers max_positions.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/ops/attention.h"

namespace infer {

class KvCache {
 public:
  // Allocates every ring and chunk buffer; nothing is allocated afterwards.
  KvCache(const ModelConfig& cfg, int64_t max_positions, int64_t max_chunk);

  // This chunk's K/V of `layer`: [max_chunk, n_kv, d] f32. Donors have their own buffers (their
  // shared layers read them later in the same forward, §5); other layers share one pair.
  float* chunk_k(int layer) { return chunk_k_[size_t(layer)]; }
  float* chunk_v(int layer) { return chunk_v_[size_t(layer)]; }

  // What `layer` (one that computes K/V) attends over for a chunk starting at pos0: its ring
  // holding positions [pos0 - slots, pos0) and the chunk buffers.
  KvView view(int layer, int64_t pos0) const;

  // Appends the chunk's T positions pos0.. to the layer's ring (keeping the last `slots`).
  void commit(int layer, int64_t pos0, int64_t T);

  int64_t slots(int layer) const { return layers_[size_t(layer)].slots; }
  size_t bytes() const;

 private:
  struct Layer {
    int64_t slots = 0;        // ring size; 0 for KV-shared layers (they own no cache)
    int64_t row = 0;          // floats per position: n_kv * d
    std::vector<float> k, v;  // [slots, n_kv, d]
    std::vector<float> own_chunk_k, own_chunk_v;  // donors only: [max_chunk, n_kv, d]
  };
  std::vector<Layer> layers_;
  std::vector<float> shared_chunk_k_, shared_chunk_v_;  // non-donors: [max_chunk, max row]
  std::vector<float*> chunk_k_, chunk_v_;
};

}  // namespace infer
