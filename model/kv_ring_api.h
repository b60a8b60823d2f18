// What the KV ring offers outside the forward pass (DESIGN.md §4-§5): evicted tokens handed on
// with a way to read their rows, rows read from the window, and rows placed in the recall tier.
// Rows are those of the tiered layers (full-attention layers that compute K/V): K after k_norm,
// before RoPE, and V after v_norm, each [n_kv, d] f32. Stored before RoPE, a row has no position
// in it, so episodic memory can put it back at any cache position.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "base/result.h"
#include "model/kv_ring.h"

namespace infer {

// Reads rows still held by the backend's tiered layers.
class KvRows {
 public:
  virtual ~KvRows() = default;
  virtual std::span<const int> tiered_layers() const = 0;  // ascending layer indices
  virtual int64_t row_floats(int layer) const = 0;         // n_kv * d
  // k, v: [row_floats(layer)] each.
  virtual void read_row(int layer, int32_t slot, float* k, float* v) const = 0;
  // The rows of `slots` of every tiered layer i into k[i] and v[i] ([slots.size() *
  // row_floats] each, in the order of slots). Row by row here; a backend whose rows are far
  // from the host reads them all in one transfer.
  virtual void read_rows(std::span<const int32_t> slots, std::span<float* const> k,
                         std::span<float* const> v) const;
};

// Receives the tokens a chunk evicts from the window, in position order, with their rows as
// stored before the chunk overwrote their slots: rows.read_row(layer, token.slot, ...) is valid
// during the call, for those tokens' slots only. Called on the decode thread once per chunk,
// either between planning it and running it (CpuForward: the rows still in their slots) or after
// it ran, before the ring's commit (GpuForward: rows the chunk's command buffer preserved in
// host memory, read without a wait); both give the same rows. Keep it short.
class EvictionSink {
 public:
  virtual ~EvictionSink() = default;
  virtual void on_evict(std::span<const EvictedToken> tokens, const KvRows& rows) = 0;
};

// Rows of n tokens of every tiered layer: what read_kv gives and set_recall takes.
struct KvBlock {
  std::vector<int64_t> pos;              // [n] logical positions
  std::vector<int32_t> ids;              // [n]
  std::vector<int> layers;               // the tiered layers, ascending
  std::vector<std::vector<float>> k, v;  // [layers][n * row_floats(layer)]
  size_t size() const { return pos.size(); }
  // Appends the rows of `tokens` read from `rows` (allocates; for sinks that keep them).
  void append(std::span<const EvictedToken> tokens, const KvRows& rows);
};

// KvRingAccess::set_recall and read_kv for any backend: the ring's bookkeeping plus its rows
// (CpuForward and GpuForward differ only in how a row is stored).
using WriteKvRow = std::function<Result<void>(int layer, int32_t slot, const float* k,
                                              const float* v)>;
// Checks block against rows' tiered layers, records it in the ring's recall tier and writes its
// rows to slots anchors + window + j.
Result<void> place_recall(KvRing& ring, const KvRows& rows, const KvBlock& block,
                          const WriteKvRow& write_row);
// The rows of logical positions [pos, pos + n), all of which must be in the ring.
Result<void> read_ring_kv(const KvRing& ring, const KvRows& rows, int64_t pos, int64_t n,
                          KvBlock* out);

// The ring controls of a backend that runs one (Forward::kv_ring()).
class KvRingAccess {
 public:
  virtual ~KvRingAccess() = default;
  virtual const KvRing& ring() const = 0;
  // nullptr: evicted tokens are dropped.
  virtual void set_eviction_sink(EvictionSink* sink) = 0;
  // Replaces the recall tier with block's rows (at most R tokens, in the order given; the
  // tier is attended at cache positions right after the anchors).
  virtual Result<void> set_recall(const KvBlock& block) = 0;
  // The rows of logical positions [pos, pos + n), which must all be in the anchors or window.
  virtual Result<void> read_kv(int64_t pos, int64_t n, KvBlock* out) const = 0;
};

}  // namespace infer
