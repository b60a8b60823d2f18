// The KV rings on the device (GEMMA4_TEXT.md §5, gpu/ops/attention.h): per layer that computes
// K/V, K and V rings of [slots, n_kv, d] f32 where position p lives in slot p % slots.
// KV-shared layers own none and read their donor's ring.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/result.h"
#include "gpu/buffer.h"
#include "model/config.h"

namespace infer::gpu {

class VulkanContext;

struct KvRing {
  Buffer k, v;
  uint32_t slots = 0;
  uint32_t n_kv = 0;
  uint32_t d = 0;
  // INFER_KV_* (shaders/attention.h). Tiered (the KV ring's full layers): `slots` = A + W + R
  // ring rows, then max_chunk staging rows for the chunk being attended (kv_commit moves them).
  uint32_t mode = 0;
};

class GpuKv {
 public:
  // Rings hold every key a query of a chunk of up to max_chunk tokens needs after the whole chunk
  // is written: sliding layers W - 1 + max_chunk slots, full layers max_positions (both capped
  // at max_positions, where no slot is ever reused).
  // tiered > 0: the KV ring (DESIGN.md §4) with `tiered` = A + W + R slots on full layers;
  // max_positions then only caps nothing (pass a bound above W - 1 + max_chunk).
  static Result<std::unique_ptr<GpuKv>> create(const VulkanContext& ctx, const ModelConfig& cfg,
                                               int64_t max_positions, int64_t max_chunk,
                                               int64_t tiered = 0);

  // The ring layer `layer` attends over: its own, or its donor's when KV-shared.
  const KvRing& ring(int layer) const { return *rings_[size_t(owner_[size_t(layer)])]; }
  // Layer `layer`'s own cache (nullptr on KV-shared layers).
  const KvRing* own(int layer) const { return rings_[size_t(layer)].get(); }
  size_t bytes() const { return bytes_; }

 private:
  GpuKv() = default;
  std::vector<std::unique_ptr<KvRing>> rings_;  // per layer; null on KV-shared layers
  std::vector<int> owner_;                      // per layer: the layer whose ring it reads
  size_t bytes_ = 0;
};

// Slots of a ring for one layer type (see GpuKv::create).
int64_t kv_ring_slots(const ModelConfig& cfg, LayerType type, int64_t max_positions,
                      int64_t max_chunk);

}  // namespace infer::gpu
