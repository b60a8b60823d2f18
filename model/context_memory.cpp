// The arithmetic of context_memory.h, one term per buffer the CPU forward allocates.
#include "model/context_memory.h"

#include <algorithm>
#include <set>

namespace infer {

ContextBytes cpu_context_bytes(const ModelConfig& cfg, int64_t max_positions,
                               const RingConfig* ring, int64_t max_chunk) {
  constexpr size_t kFloat = sizeof(float);
  ContextBytes b;
  // The ring cuts chunks to what fits its window (KvRing::max_chunk(); FIFO: W).
  const int64_t capacity = ring ? ring->anchors + ring->window + ring->recall : 0;
  const int64_t C = ring ? std::min(max_chunk, ring->window) : max_chunk;
  const int64_t positions = ring ? INT64_MAX : max_positions;
  int64_t max_row = 0, max_ring_floats = 0;
  for (const LayerPlan& p : cfg.layers) {
    const int64_t row = int64_t(p.num_key_value_heads) * p.head_dim;
    if (p.kv_shared) continue;
    const bool sliding = p.type == LayerType::kSliding;
    const bool tiered = ring != nullptr && !sliding;
    const int64_t slots = sliding ? std::min<int64_t>(cfg.text.sliding_window - 1, positions)
                          : tiered ? capacity
                                   : positions;
    b.kv_rows += 2 * size_t(slots * row) * kFloat;
    if (p.is_donor) {
      b.kv_buffers += 2 * size_t(C * row) * kFloat;
      if (ring) b.kv_buffers += (2 * size_t(slots * row) + size_t(C * row)) * kFloat;
    } else {
      max_row = std::max(max_row, row);
      max_ring_floats = std::max(max_ring_floats, slots * row);
    }
  }
  b.kv_buffers += 2 * size_t(C * max_row) * kFloat;
  if (ring) {
    b.kv_buffers += (2 * size_t(max_ring_floats) + size_t(C * max_row)) * kFloat;
    // RoPE: one cos and one sin table [positions, d/2] per distinct frequency set, over every
    // cache position a key can take (CpuForward::rope_positions()).
    const int64_t rope_positions =
        std::max<int64_t>(capacity, cfg.text.sliding_window) + C;
    std::set<std::pair<int, LayerType>> tables;  // head_dim and type fix the frequencies
    for (const LayerPlan& p : cfg.layers) tables.insert({p.head_dim, p.type});
    for (const auto& [d, type] : tables) b.rope += 2 * size_t(rope_positions) * size_t(d / 2) * kFloat;
    // KvRing: pos (8), id (4), mass (4), is_victim (1), key_slots (4) per slot; order, victims
    // (4 each) and evicted (16) per window slot; CpuForward's mass scores under --evict mass.
    b.bookkeeping = size_t(capacity) * 21 + size_t(ring->window) * 24;
    if (ring->evict == EvictPolicy::kMass) b.bookkeeping += size_t(2 * capacity + C) * kFloat;
  }
  return b;
}

}  // namespace infer
