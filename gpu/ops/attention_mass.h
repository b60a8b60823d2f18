// Attention mass on the GPU for `--evict mass` (H2O, DESIGN.md §4, docs/KV_RING.md): per cached
// key of the KV ring's tiered layers, the softmax probability it received, summed over query
// heads, the chunk's tokens and the full-attention layers (model/ops/attention_mass.h on the
// CPU), read back by the host for KvRing::add_mass. Only a ring under kMass creates this op, so
// FIFO recordings hold none of its dispatches.
#pragma once

#include <cstdint>
#include <memory>

#include "base/result.h"
#include "gpu/buffer.h"
#include "gpu/ops/attention.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"

namespace infer::gpu {

class VulkanContext;

class AttentionMassOps {
 public:
  struct Limits {
    uint32_t max_T = 1;     // tokens per chunk
    uint32_t max_n_q = 0;   // query heads
    uint32_t max_d = 0;     // head dim
    uint32_t max_keys = 0;  // cached keys a chunk attends at most: A + W + R
  };
  // Allocates the lse scratch and the mass buffers (device and host) once.
  static Result<std::unique_ptr<AttentionMassOps>> create(const VulkanContext& ctx,
                                                          const Limits& limits);
  ~AttentionMassOps();

  // Two dispatches after attend() on a tiered layer (dims.mode INFER_KV_TIERED, window 0), the
  // same q and caches: mass[s] = (accumulate ? mass[s] : 0) + Σ_{t < T, h < n_q} p_{t,h}(s) for
  // s < step's n_keys, p the softmax over every key query t sees (scores unscaled, §4.7).
  Result<void> record(Recorder& rec, Binding step, const AttentionDims& dims, Binding q,
                      Binding k_cache, Binding inv_freq, bool accumulate) const;
  // Copies the mass to the host buffer (after the chunk's last record()).
  void record_readback(Recorder& rec) const;
  // The host copy [max_keys]: valid after the recording that read it back has finished.
  const float* host() const;
  const Buffer& device() const;

 private:
  AttentionMassOps() = default;
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace infer::gpu
