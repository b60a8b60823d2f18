// GpuForward's KV ring controls (model/kv_ring_api.h): rows of the tiered layers read from and
// written to the device caches. The per-chunk bookkeeping (plan, sink, commit) is in
// GpuForward::Impl::run; these are the out-of-band calls (eviction sinks, recall, read_kv).
#include <string>

#include "base/check.h"
#include "gpu/context.h"
#include "gpu/gpu_forward_impl.h"

namespace infer::gpu {

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
  const std::span<const int> layers = m.rows->tiered_layers();
  const size_t n = b.size();
  bool ok = b.ids.size() == n && b.layers.size() == layers.size() && b.k.size() == layers.size() &&
            b.v.size() == layers.size();
  for (size_t i = 0; ok && i < layers.size(); ++i) {
    const size_t want = n * size_t(m.rows->row_floats(layers[i]));
    ok = b.layers[i] == layers[i] && b.k[i].size() == want && b.v[i].size() == want;
  }
  if (!ok) {
    return make_error(ErrorCode::kInvalidArgument,
                      "set_recall: the block's layers or row sizes do not match this model's "
                      "tiered layers");
  }
  INFER_TRY_VOID(m.ring->set_recall(b.pos, b.ids));
  const int32_t base = int32_t(m.ring->config().anchors + m.ring->config().window);
  for (size_t i = 0; i < layers.size(); ++i) {
    const size_t row = size_t(m.rows->row_floats(layers[i]));
    for (size_t j = 0; j < n; ++j) {
      INFER_TRY_VOID(m.rows->write_row(layers[i], base + int32_t(j), b.k[i].data() + j * row,
                                       b.v[i].data() + j * row));
    }
  }
  return Ok{};
}

Result<void> GpuForward::read_kv(int64_t pos, int64_t n, KvBlock* out) const {
  const Impl& m = *impl_;
  INFER_CHECK(m.ring != nullptr, "read_kv outside ring mode");
  std::vector<EvictedToken> tokens;  // the same record: position, id and where the rows are
  for (int64_t p = pos; p < pos + n; ++p) {
    const int32_t slot = m.ring->find(p);
    if (slot < 0) {
      return make_error(ErrorCode::kNotFound,
                        "read_kv: position " + std::to_string(p) + " is not in the ring");
    }
    tokens.push_back(EvictedToken{p, m.ring->id_of(slot), slot});
  }
  *out = KvBlock{};
  out->append(tokens, *m.rows);
  return Ok{};
}

}  // namespace infer::gpu
