// GpuForward's KV ring controls (model/kv_ring_api.h): rows of the tiered layers read from and
// written to the device caches, and the mass op of --evict mass. The per-chunk bookkeeping
// (plan, sink, add_mass, commit) is in GpuForward::Impl::run; these are the out-of-band calls
// (eviction sinks, recall, read_kv).
#include <algorithm>
#include <cstring>
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
  ++downloads_;
  // KvRows reads cannot fail by contract: a lost device ends the stream here.
  const Result<void> rk = download(ctx_, r.k, VkDeviceSize(slot) * bytes, k, bytes);
  INFER_CHECK(rk.ok(), "reading K row %d of layer %d: %s", slot, layer, rk.error().message.c_str());
  const Result<void> rv = download(ctx_, r.v, VkDeviceSize(slot) * bytes, v, bytes);
  INFER_CHECK(rv.ok(), "reading V row %d of layer %d: %s", slot, layer, rv.error().message.c_str());
}

void GpuKvRows::read_rows(std::span<const int32_t> slots, std::span<float* const> k,
                          std::span<float* const> v) const {
  if (slots.empty()) return;
  // Staging holds layer i's K rows then its V rows, in the order of slots.
  std::vector<GatherRegion> regions;
  std::vector<size_t> at(tiered_.size());
  size_t bytes = 0;
  for (size_t i = 0; i < tiered_.size(); ++i) {
    const KvRing& r = kv_.ring(tiered_[i]);
    const size_t row = size_t(row_floats(tiered_[i])) * sizeof(float);
    at[i] = bytes;
    for (const Buffer* b : {&r.k, &r.v}) {
      for (size_t j = 0; j < slots.size();) {
        INFER_CHECK(slots[j] >= 0 && uint32_t(slots[j]) < r.slots, "layer %d slot %d of %u",
                    tiered_[i], slots[j], r.slots);
        size_t n = 1;
        while (j + n < slots.size() && slots[j + n] == slots[j] + int32_t(n)) ++n;
        regions.push_back({b, VkDeviceSize(slots[j]) * row, bytes + j * row, n * row});
        j += n;
      }
      bytes += slots.size() * row;
    }
  }
  std::vector<float> staged(bytes / sizeof(float));
  ++downloads_;
  // KvRows reads cannot fail by contract: a lost device ends the stream here.
  const Result<void> got = download_gather(ctx_, regions, staged.data(), bytes);
  INFER_CHECK(got.ok(), "reading %zu rows of the tiered layers: %s", slots.size(),
              got.error().message.c_str());
  for (size_t i = 0; i < tiered_.size(); ++i) {
    const size_t n = slots.size() * size_t(row_floats(tiered_[i]));
    std::memcpy(k[i], staged.data() + at[i] / sizeof(float), n * sizeof(float));
    std::memcpy(v[i], staged.data() + at[i] / sizeof(float) + n, n * sizeof(float));
  }
}

Result<void> GpuKvRows::write_rows(int layer, int32_t first, int32_t n, const float* k,
                                   const float* v) const {
  KvRing& r = const_cast<KvRing&>(kv_.ring(layer));  // the rows, not the ring's shape
  INFER_CHECK(first >= 0 && n >= 0 && uint32_t(first) + uint32_t(n) <= r.slots,
              "layer %d slots %d + %d of %u", layer, first, n, r.slots);
  const size_t row = size_t(row_floats(layer)) * sizeof(float);
  const size_t bytes = row * size_t(n);
  INFER_TRY_VOID(upload(ctx_, r.k, VkDeviceSize(first) * row, k, bytes));
  return upload(ctx_, r.v, VkDeviceSize(first) * row, v, bytes);
}

void StagedKvRows::read_row(int layer, int32_t slot, float* k, float* v) const {
  const std::span<const int> layers = tiered_layers();
  const auto l = std::lower_bound(layers.begin(), layers.end(), layer);
  INFER_CHECK(l != layers.end() && *l == layer, "layer %d is not tiered", layer);
  const auto e = std::find_if(evicted_.begin(), evicted_.end(),
                              [&](const EvictedToken& t) { return t.slot == slot; });
  INFER_CHECK(e != evicted_.end(), "slot %d of layer %d was not evicted by this chunk", slot,
              layer);
  const size_t li = size_t(l - layers.begin());
  const uint64_t row = uint64_t(row_floats(layer));
  const uint64_t at = uint64_t(e - evicted_.begin()) * row;
  std::memcpy(k, staging_ + k_off_[li] + at, row * sizeof(float));
  std::memcpy(v, staging_ + v_off_[li] + at, row * sizeof(float));
}

Result<void> GpuForward::Impl::ensure_evict_staging() {
  if (sink == nullptr || evict_staging.handle() != VK_NULL_HANDLE) return Ok{};
  // A chunk of T tokens evicts at most T (each token enters the window): max_chunk rows a layer.
  uint64_t floats = 0;
  for (int layer : rows->tiered_layers()) {
    const uint64_t n = uint64_t(max_chunk) * uint64_t(rows->row_floats(layer));
    evict_k_off.push_back(floats);
    evict_v_off.push_back(floats + n);
    floats += 2 * n;
  }
  INFER_CHECK(floats <= UINT32_MAX, "evicted rows' staging: %llu floats",
              (unsigned long long)floats);
  Result<Buffer> b = Buffer::create(*ctx, std::max<uint64_t>(floats, 1) * sizeof(float),
                                    BufferKind::kHost, "forward: evicted rows (host)");
  if (!b.ok()) {
    evict_k_off.clear();
    evict_v_off.clear();
    return b.error();
  }
  evict_staging = std::move(*b);
  // Every recording from now on holds the copies: the decode ones again, prefill's on next use.
  INFER_TRY_VOID(record(*decode_logits, 1, Head::kLast));
  INFER_TRY_VOID(record(*decode_greedy, 1, Head::kArgmax));
  chunks.clear();
  if (quiet) {
    for (auto& r : quiet->upper) r.reset();
    for (auto& r : quiet->carried) r.reset();
  }
  return Ok{};
}

int64_t GpuForward::kv_row_downloads() const {
  return impl_->rows ? impl_->rows->downloads() : 0;
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
  // place_recall checks the block and records it in the ring; a layer's rows then go to the
  // consecutive recall slots A + W + j as one K and one V transfer (2 waits a layer, not a row).
  INFER_TRY_VOID(place_recall(*m.ring, *m.rows, b,
                              [](int, int32_t, const float*, const float*) -> Result<void> {
                                return Ok{};
                              }));
  const int32_t base = int32_t(m.ring->config().anchors + m.ring->config().window);
  const std::span<const int> layers = m.rows->tiered_layers();
  for (size_t i = 0; i < layers.size() && b.size() > 0; ++i) {
    INFER_TRY_VOID(m.rows->write_rows(layers[i], base, int32_t(b.size()), b.k[i].data(),
                                      b.v[i].data()));
  }
  return Ok{};
}

Result<void> GpuForward::read_kv(int64_t pos, int64_t n, KvBlock* out) const {
  const Impl& m = *impl_;
  INFER_CHECK(m.ring != nullptr, "read_kv outside ring mode");
  return read_ring_kv(*m.ring, *m.rows, pos, n, out);
}

}  // namespace infer::gpu
