// KV rings: allocated once at create for the whole stream; steady-state decode allocates nothing.
#include "gpu/gpu_kv.h"

#include <algorithm>
#include <limits>
#include <string>

#include "base/check.h"
#include "shaders/attention.h"

namespace infer::gpu {

int64_t kv_ring_slots(const ModelConfig& cfg, LayerType type, int64_t max_positions,
                      int64_t max_chunk) {
  // A chunk's first query at pos0 needs keys from pos0 - W + 1 while the chunk writes up to
  // pos0 + T - 1: W - 1 + T slots keep them all (§4.7, §5).
  const int64_t want =
      type == LayerType::kSliding ? int64_t(cfg.text.sliding_window) - 1 + max_chunk : max_positions;
  return std::min(want, max_positions);
}

Result<std::unique_ptr<GpuKv>> GpuKv::create(const VulkanContext& ctx, const ModelConfig& cfg,
                                             int64_t max_positions, int64_t max_chunk,
                                             int64_t tiered) {
  INFER_CHECK(max_positions > 0 && max_chunk > 0, "GpuKv: max_positions %lld, max_chunk %lld",
              (long long)max_positions, (long long)max_chunk);
  std::unique_ptr<GpuKv> kv(new GpuKv());
  const size_t L = cfg.layers.size();
  kv->rings_.resize(L);
  kv->owner_.resize(L);
  for (size_t i = 0; i < L; ++i) {
    const LayerPlan& plan = cfg.layers[i];
    kv->owner_[i] = plan.kv_shared ? plan.kv_source : int(i);
    if (plan.kv_shared) continue;
    const bool sliding = plan.type == LayerType::kSliding;
    const bool is_tiered = tiered > 0 && !sliding;
    const int64_t slots =
        is_tiered ? tiered : kv_ring_slots(cfg, plan.type, max_positions, max_chunk);
    const int64_t rows = is_tiered ? slots + max_chunk : slots;  // tiered: staging rows after
    const uint64_t floats = uint64_t(rows) * uint64_t(plan.num_key_value_heads) *
                            uint64_t(plan.head_dim);
    if (slots > std::numeric_limits<uint32_t>::max() || floats == 0) {
      return make_error(ErrorCode::kShape, "KV ring of layer " + std::to_string(i) + ": " +
                                               std::to_string(slots) + " slots");
    }
    auto ring = std::make_unique<KvRing>();
    ring->slots = uint32_t(slots);
    ring->n_kv = uint32_t(plan.num_key_value_heads);
    ring->d = uint32_t(plan.head_dim);
    ring->mode = tiered == 0 ? INFER_KV_EXACT : is_tiered ? INFER_KV_TIERED : INFER_KV_SLIDING;
    const std::string name = "layers." + std::to_string(i) + ".";
    INFER_TRY(ring->k, Buffer::create(ctx, floats * sizeof(float), BufferKind::kDevice,
                                      name + "k ring"));
    INFER_TRY(ring->v, Buffer::create(ctx, floats * sizeof(float), BufferKind::kDevice,
                                      name + "v ring"));
    kv->bytes_ += size_t(2 * floats * sizeof(float));
    kv->rings_[i] = std::move(ring);
  }
  for (size_t i = 0; i < L; ++i) {
    const int src = kv->owner_[i];
    if (src < 0 || size_t(src) >= L || kv->rings_[size_t(src)] == nullptr) {
      return make_error(ErrorCode::kShape, "layer " + std::to_string(i) + " reads the KV of layer " +
                                               std::to_string(src) + ", which computes none");
    }
    const LayerPlan& a = cfg.layers[i];
    const LayerPlan& b = cfg.layers[size_t(src)];
    if (a.head_dim != b.head_dim || a.type != b.type) {
      return make_error(ErrorCode::kShape, "layer " + std::to_string(i) + " (head_dim " +
                                               std::to_string(a.head_dim) + ") reads layer " +
                                               std::to_string(src) + " (head_dim " +
                                               std::to_string(b.head_dim) + ") of another shape");
    }
  }
  return kv;
}

}  // namespace infer::gpu
