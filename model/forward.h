// The interface every backend's forward pass offers (CpuForward, gpu::GpuForward): feed a stream
// of token ids, get logits. The CLI, the bench and the tests drive a backend only through it.
#pragma once

#include <cstdint>
#include <span>

#include "base/result.h"

namespace infer {

class KvRingAccess;

class Forward {
 public:
  virtual ~Forward() = default;

  // Feeds ids at positions position().. (in chunks the backend chooses). Writes the logits of
  // every fed position to `logits` ([ids.size(), V] f32) when all_logits, else of the last one
  // ([V]). Returns an error when the stream would exceed the backend's max_positions.
  virtual Result<void> prefill(std::span<const int32_t> ids, float* logits,
                               bool all_logits = false) = 0;
  // One token at position(): logits [V].
  virtual Result<void> decode(int32_t id, float* logits) = 0;
  // Forgets the stream (position 0 again); keeps the buffers.
  virtual void reset() = 0;
  virtual int64_t position() const = 0;
  virtual int64_t vocab_size() const = 0;
  // The KV ring's controls (model/kv_ring_api.h) when the backend runs one, else nullptr.
  virtual KvRingAccess* kv_ring() { return nullptr; }
};

}  // namespace infer
