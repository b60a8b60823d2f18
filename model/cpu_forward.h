// The CPU forward pass (GEMMA4_TEXT.md §4-§5): prefill in chunks and decode with a KV cache.
// All buffers are sized at construction; prefill and decode allocate nothing afterwards.
#pragma once

#include <cstdint>
#include <span>

#include "model/forward.h"
#include "model/kv_ring_api.h"
#include "model/model.h"

namespace infer {

class ThreadPool;
struct QuiescenceConfig;
struct QuiescenceStats;

class CpuForward final : public Forward, public KvRingAccess {
 public:
  // The exact model: max_positions bounds the stream (full-attention caches hold that many
  // positions; sliding caches hold sliding_window - 1); max_chunk bounds one prefill chunk.
  CpuForward(const Model& model, ThreadPool& pool, int64_t max_positions, int64_t max_chunk = 256);
  // The KV ring (DESIGN.md §4): an endless stream in buffers fixed here; equal to the exact
  // model while the stream fits in anchors + window with nothing recalled. Chunks are cut to at
  // most ring.max_chunk(). ring must pass validate().
  CpuForward(const Model& model, ThreadPool& pool, const RingConfig& ring,
             int64_t max_chunk = 256);
  ~CpuForward() override;

  // Feeds ids at positions position().. (split into chunks of at most max_chunk). Writes the logits
  // of every fed position to `logits` ([ids.size(), V] f32) when all_logits, else of the last one
  // ([V]). Returns an error when the stream would exceed max_positions.
  Result<void> prefill(std::span<const int32_t> ids, float* logits,
                       bool all_logits = false) override;
  // One token at position(): logits [V].
  Result<void> decode(int32_t id, float* logits) override;
  // Forgets the stream (position 0 again); keeps the buffers.
  void reset() override;
  int64_t position() const override;
  int64_t vocab_size() const override;
  KvRingAccess* kv_ring() override;  // this in ring mode, else nullptr

  // KvRingAccess (ring mode only).
  const KvRing& ring() const override;
  void set_eviction_sink(EvictionSink* sink) override;
  Result<void> set_recall(const KvBlock& block) override;
  Result<void> read_kv(int64_t pos, int64_t n, KvBlock* out) const override;

  // Benchmarks: the cache as after n tokens streamed (FIFO, nothing recalled), rows filled with
  // synthetic values, position() = n. Exact mode needs n < max_positions.
  Result<void> synthesize_context(int64_t n, uint64_t seed = 1);
  size_t kv_bytes() const;  // K/V rows held (exact: sized by max_positions; ring: fixed)

  // Quiescence (DESIGN.md §6, model/quiescence.h): decode tokens whose stream barely moves skip
  // the upper layers. nullptr: off (the default). Sizes its buffers here; forgets the history.
  void set_quiescence(const QuiescenceConfig* cfg);
  const QuiescenceStats* quiescence_stats() const;  // nullptr when off

  // Diagnostics: after the embedding (layer -1) and after every layer, hook(ctx, layer, pos0, T, x)
  // sees the chunk's stream x [T, H] f32 (tests locate the first diverging layer). nullptr: off.
  using LayerHook = void (*)(void* ctx, int layer, int64_t pos0, int64_t T, const float* x);
  void set_layer_hook(LayerHook hook, void* ctx);

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace infer
