// The CPU forward pass (GEMMA4_TEXT.md §4-§5): prefill in chunks and decode with a KV cache.
// All buffers are sized at construction; prefill and decode allocate nothing afterwards.
#pragma once

#include <cstdint>
#include <span>

#include "model/forward.h"
#include "model/model.h"

namespace infer {

class ThreadPool;

class CpuForward final : public Forward {
 public:
  // max_positions bounds the stream (full-attention caches hold that many positions; sliding
  // caches hold sliding_window - 1); max_chunk bounds the tokens of one prefill chunk.
  CpuForward(const Model& model, ThreadPool& pool, int64_t max_positions, int64_t max_chunk = 256);
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

  // Diagnostics: after the embedding (layer -1) and after every layer, hook(ctx, layer, pos0, T, x)
  // sees the chunk's stream x [T, H] f32 (tests locate the first diverging layer). nullptr: off.
  using LayerHook = void (*)(void* ctx, int layer, int64_t pos0, int64_t T, const float* x);
  void set_layer_hook(LayerHook hook, void* ctx);

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace infer
