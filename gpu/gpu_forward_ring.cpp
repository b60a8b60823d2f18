// GpuForward's KV ring controls (model/kv_ring_api.h): rows of the tiered layers read from and
// written to the device caches, and the mass op of --evict mass. The per-chunk bookkeeping
// (plan, sink, add_mass, commit) is in GpuForward::Impl::run; these are the out-of-band calls
// (eviction sinks, recall, read_kv).
#include <algorithm>
#include <string>

#include "base/check.h"
#include "gpu/context.h"
#include "gpu/gpu_forward_impl.h"

namespace infer::gpu {

Result<std::unique_ptr<AttentionMassOps>> create_mass_ops(const VulkanContext& ctx,
                                                          const ModelConfig& cfg,
                                                          int64_t max_chunk, int64_t ring_keys) {
  AttentionMassOps::Limits lim;
  lim.max_T = uint32_t(max_chunk);
  lim.max_n_q = uint32_t(cfg.text.num_attention_heads);
  for (const LayerPlan& p : cfg.layers) lim.max_d = std::max(lim.max_d, uint32_t(p.head_dim));
  lim.max_keys = uint32_t(ring_keys);
  return AttentionMassOps::create(ctx, lim);
}

int64_t GpuKvRows::row_floats(int layer) const {
  const KvRing& r = kv_.ring(layer);
  return int64_t(r.n_kv) * r.d;
}

void GpuKvRows::read_row(int layer, int32_t slot, float* k, float* v) const {
  const KvRing& r = kv_.ring(layer);
  INFER_CHECK(slot >= 0 && uint32_t(slot) < r.slots, "layer %d slot %d of %u", layer, slot,
              r.slots);
  const size_t bytes = size_t(row_floats(layer)) * sizeof(float);
  // KvRows reads cannot fail by contract: a lost device ends the stream here.
  const Result<void> rk = download(ctx_, r.k, VkDeviceSize(slot) * bytes, k, bytes);
  INFER_CHECK(rk.ok(), "reading K row %d of layer %d: %s", slot, layer, rk.error().message.c_str());
  const Result<void> rv = download(ctx_, r.v, VkDeviceSize(slot) * bytes, v, bytes);
  INFER_CHECK(rv.ok(), "reading V row %d of layer %d: %s", slot, layer, rv.error().message.c_str());
}

Result<void> GpuKvRows::write_row(int layer, int32_t slot, const float* k, const float* v) const {
  KvRing& r = const_cast<KvRing&>(kv_.ring(layer));  // the rows, not the ring's shape
  INFER_CHECK(slot >= 0 && uint32_t(slot) < r.slots, "layer %d slot %d of %u", layer, slot,
              r.slots);
  const size_t bytes = size_t(row_floats(layer)) * sizeof(float);
  INFER_TRY_VOID(upload(ctx_, r.k, VkDeviceSize(slot) * bytes, k, bytes));
  return upload(ctx_, r.v, VkDeviceSize(slot) * bytes, v, bytes);
}

KvRingAccess* GpuForward::kv_ring() { return impl_->ring ? this : nullptr; }

const infer::KvRing& GpuForward::ring() const {
  INFER_CHECK(impl_->ring != nullptr, "ring() outside ring mode");
  return *impl_->ring;
}

void GpuForward::set_eviction_sink(EvictionSink* sink) { impl_->sink = sink; }

Result<void> GpuForward::set_recall(const KvBlock& b) {
  Impl& m = *impl_;
  INFER_CHECK(m.ring != nullptr, "set_recall outside ring mode");
  return place_recall(*m.ring, *m.rows, b,
                      [&](int layer, int32_t slot, const float* k, const float* v) {
                        return m.rows->write_row(layer, slot, k, v);
                      });
}

Result<void> GpuForward::read_kv(int64_t pos, int64_t n, KvBlock* out) const {
  const Impl& m = *impl_;
  INFER_CHECK(m.ring != nullptr, "read_kv outside ring mode");
  return read_ring_kv(*m.ring, *m.rows, pos, n, out);
}

}  // namespace infer::gpu
