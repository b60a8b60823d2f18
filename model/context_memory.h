// What a context costs in memory before it is allocated: the CPU forward's KV rows, its ring-mode
// gather copies, RoPE table and ring bookkeeping, for a fixed cache of max_positions or a KV ring
// (DESIGN.md §4). The CLI checks these against the machine so that a huge --window is refused
// with the figures instead of swapping the machine into the ground.
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/config.h"
#include "model/kv_ring.h"

namespace infer {

struct ContextBytes {
  size_t kv_rows = 0;      // K and V [slots, n_kv, d] f32 of every layer that owns KV
  size_t kv_buffers = 0;   // chunk K/V and (ring) the gathered, rotated copies
  size_t rope = 0;         // ring mode: cos/sin tables over every cache position
  size_t bookkeeping = 0;  // ring mode: KvRing's per-slot arrays and the mass scores
  size_t total() const { return kv_rows + kv_buffers + rope + bookkeeping; }
};

// A CpuForward of `cfg` with a fixed cache of max_positions (ring == nullptr) or the KV ring
// `ring`, prefilling chunks of at most max_chunk (CpuForward's default 256). Mirrors
// KvCache::allocate(), RopeTables and KvRing's constructor; kv_rows equals KvCache::bytes().
ContextBytes cpu_context_bytes(const ModelConfig& cfg, int64_t max_positions,
                               const RingConfig* ring, int64_t max_chunk = 256);

}  // namespace infer
