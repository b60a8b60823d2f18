// KV cache rows. Exact mode: slot = pos % slots; a chunk is attended as (ring ∪ chunk) and
// committed after, so a sliding ring of W-1 slots suffices whatever the chunk length (§5).
// Ring mode: the same for sliding layers, the plan's slots for full ones; keys are rotated per
// chunk at their cache positions (kv_ring.h), which costs a copy of the attended rows per layer
// and chunk (a few MB per token on E2B, ~1% of the weights a decode step reads) and keeps every
// position below A + W + R + chunk whatever the stream's length.
#include "model/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "base/check.h"
#include "model/ops/rope.h"

namespace infer {

KvCache::KvCache(const ModelConfig& cfg, int64_t max_positions, int64_t max_chunk) {
  allocate(cfg, max_positions, max_chunk);
}

KvCache::KvCache(const ModelConfig& cfg, const KvRing& ring, int64_t max_chunk) : ring_(&ring) {
  INFER_CHECK(max_chunk <= ring.max_chunk(), "chunk %lld > ring chunk %lld", (long long)max_chunk,
              (long long)ring.max_chunk());
  allocate(cfg, std::numeric_limits<int64_t>::max(), max_chunk);
}

void KvCache::allocate(const ModelConfig& cfg, int64_t max_positions, int64_t max_chunk) {
  const int L = cfg.text.num_hidden_layers;
  layers_.resize(size_t(L));
  int64_t max_row = 0, max_ring_floats = 0;
  for (int i = 0; i < L; ++i) {
    const LayerPlan& plan = cfg.layers[size_t(i)];
    Layer& l = layers_[size_t(i)];
    l.d = plan.head_dim;
    l.n_kv = plan.num_key_value_heads;
    l.row = l.n_kv * l.d;
    if (plan.kv_shared) continue;
    // A sliding query sees itself and W-1 earlier positions, so W-1 cached ones suffice (§4.7).
    const bool sliding = plan.type == LayerType::kSliding;
    l.tiered = ring_ != nullptr && !sliding;
    l.slots = sliding  ? std::min<int64_t>(cfg.text.sliding_window - 1, max_positions)
              : l.tiered ? ring_->capacity()
                         : max_positions;
    if (l.tiered) tiered_.push_back(i);
    l.k.assign(size_t(l.slots * l.row), 0.0f);
    l.v.assign(size_t(l.slots * l.row), 0.0f);
    if (plan.is_donor) {
      l.own_chunk_k.assign(size_t(max_chunk * l.row), 0.0f);
      l.own_chunk_v.assign(size_t(max_chunk * l.row), 0.0f);
      if (ring_ != nullptr) {
        l.own_gk.assign(size_t(l.slots * l.row), 0.0f);
        l.own_gv.assign(size_t(l.slots * l.row), 0.0f);
        l.own_ck.assign(size_t(max_chunk * l.row), 0.0f);
      }
    } else {
      max_row = std::max(max_row, l.row);
      max_ring_floats = std::max(max_ring_floats, l.slots * l.row);
    }
  }
  shared_chunk_k_.assign(size_t(max_chunk * max_row), 0.0f);
  shared_chunk_v_.assign(size_t(max_chunk * max_row), 0.0f);
  if (ring_ != nullptr) {
    shared_gk_.assign(size_t(max_ring_floats), 0.0f);
    shared_gv_.assign(size_t(max_ring_floats), 0.0f);
    shared_ck_.assign(size_t(max_chunk * max_row), 0.0f);
  }
  for (auto* p : {&chunk_k_, &chunk_v_, &gk_, &gv_, &ck_}) p->assign(size_t(L), nullptr);
  for (int i = 0; i < L; ++i) {
    Layer& l = layers_[size_t(i)];
    const bool own = !l.own_chunk_k.empty();
    chunk_k_[size_t(i)] = own ? l.own_chunk_k.data() : shared_chunk_k_.data();
    chunk_v_[size_t(i)] = own ? l.own_chunk_v.data() : shared_chunk_v_.data();
    gk_[size_t(i)] = own ? l.own_gk.data() : shared_gk_.data();
    gv_[size_t(i)] = own ? l.own_gv.data() : shared_gv_.data();
    ck_[size_t(i)] = own ? l.own_ck.data() : shared_ck_.data();
  }
}

int64_t KvCache::query_pos(int layer, int64_t pos0) const {
  if (ring_ == nullptr) return pos0;
  const Layer& l = layers_[size_t(layer)];
  return l.tiered ? ring_->current().n_keys : std::min(pos0, l.slots);
}

void KvCache::gather(int layer, int64_t pos0, int64_t T, const float* cos, const float* sin) {
  INFER_CHECK(ring_ != nullptr, "gather outside ring mode");
  const Layer& l = layers_[size_t(layer)];
  const size_t row_bytes = size_t(l.row) * sizeof(float);
  float* gk = gk_[size_t(layer)];
  float* gv = gv_[size_t(layer)];
  const int64_t n = query_pos(layer, pos0);
  const RingPlan& plan = ring_->current();
  for (int64_t i = 0; i < n; ++i) {
    // Full: the plan's order. Sliding: the last n positions, oldest first, at pos % slots.
    const int64_t slot = l.tiered ? plan.key_slots[size_t(i)] : (pos0 - n + i) % l.slots;
    std::memcpy(gk + i * l.row, l.k.data() + slot * l.row, row_bytes);
    std::memcpy(gv + i * l.row, l.v.data() + slot * l.row, row_bytes);
  }
  const int64_t half = l.d / 2;
  rope_apply(gk, n, l.n_kv, l.d, cos, sin);
  float* ck = ck_[size_t(layer)];
  std::memcpy(ck, chunk_k_[size_t(layer)], size_t(T) * row_bytes);
  rope_apply(ck, T, l.n_kv, l.d, cos + n * half, sin + n * half);
}

KvView KvCache::view(int layer, int64_t pos0) const {
  const Layer& l = layers_[size_t(layer)];
  KvView v;
  v.slots = l.slots;
  v.chunk_v = chunk_v_[size_t(layer)];
  if (ring_ != nullptr) {
    v.cache_k = gk_[size_t(layer)];
    v.cache_v = gv_[size_t(layer)];
    v.cache_begin = 0;  // positions [0, query_pos) at slot = position
    v.chunk_k = ck_[size_t(layer)];
    return v;
  }
  v.cache_k = l.k.data();
  v.cache_v = l.v.data();
  v.cache_begin = std::max<int64_t>(0, pos0 - l.slots);
  v.chunk_k = chunk_k_[size_t(layer)];
  return v;
}

void KvCache::commit(int layer, int64_t pos0, int64_t T) {
  Layer& l = layers_[size_t(layer)];
  const float* ck = chunk_k_[size_t(layer)];
  const float* cv = chunk_v_[size_t(layer)];
  const size_t row_bytes = size_t(l.row) * sizeof(float);
  if (l.tiered) {
    const RingPlan& plan = ring_->current();
    INFER_CHECK(plan.T == T && plan.pos0 == pos0, "commit of %lld at %lld, plan %lld at %lld",
                (long long)T, (long long)pos0, (long long)plan.T, (long long)plan.pos0);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t slot = plan.write_slots[size_t(t)];
      std::memcpy(l.k.data() + slot * l.row, ck + t * l.row, row_bytes);
      std::memcpy(l.v.data() + slot * l.row, cv + t * l.row, row_bytes);
    }
    return;
  }
  for (int64_t t = std::max<int64_t>(0, T - l.slots); t < T; ++t) {
    const int64_t slot = (pos0 + t) % l.slots;
    std::memcpy(l.k.data() + slot * l.row, ck + t * l.row, row_bytes);
    std::memcpy(l.v.data() + slot * l.row, cv + t * l.row, row_bytes);
  }
}

void KvCache::read_row(int layer, int32_t slot, float* k, float* v) const {
  const Layer& l = layers_[size_t(layer)];
  INFER_CHECK(slot >= 0 && slot < l.slots, "layer %d slot %d of %lld", layer, slot,
              (long long)l.slots);
  std::memcpy(k, l.k.data() + slot * l.row, size_t(l.row) * sizeof(float));
  std::memcpy(v, l.v.data() + slot * l.row, size_t(l.row) * sizeof(float));
}

void KvCache::write_row(int layer, int32_t slot, const float* k, const float* v) {
  Layer& l = layers_[size_t(layer)];
  INFER_CHECK(slot >= 0 && slot < l.slots, "layer %d slot %d of %lld", layer, slot,
              (long long)l.slots);
  std::memcpy(l.k.data() + slot * l.row, k, size_t(l.row) * sizeof(float));
  std::memcpy(l.v.data() + slot * l.row, v, size_t(l.row) * sizeof(float));
}

void KvCache::fill_synthetic(uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (Layer& l : layers_) {
    for (auto* buf : {&l.k, &l.v}) {
      for (float& x : *buf) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;  // LCG: cheap, values irrelevant
        x = float(int32_t(s >> 32)) * (1.0f / 2147483648.0f);
      }
    }
  }
}

size_t KvCache::bytes() const {
  size_t n = 0;
  for (const Layer& l : layers_) n += (l.k.size() + l.v.size()) * sizeof(float);
  return n;
}

}  // namespace infer
