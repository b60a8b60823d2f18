// KV cache rings: slot = pos % slots. A chunk is attended as (ring ∪ chunk) and committed after, so
// a sliding ring of W-1 slots suffices whatever the chunk length (§5).
#include "model/kv_cache.h"

#include <algorithm>
#include <cstring>

namespace infer {

KvCache::KvCache(const ModelConfig& cfg, int64_t max_positions, int64_t max_chunk) {
  const int L = cfg.text.num_hidden_layers;
  layers_.resize(size_t(L));
  int64_t max_row = 0;
  for (int i = 0; i < L; ++i) {
    const LayerPlan& plan = cfg.layers[size_t(i)];
    Layer& l = layers_[size_t(i)];
    l.row = int64_t(plan.num_key_value_heads) * plan.head_dim;
    if (plan.kv_shared) continue;
    // A sliding query sees itself and W-1 earlier positions, so W-1 cached ones suffice (§4.7).
    l.slots = plan.type == LayerType::kSliding
                  ? std::min<int64_t>(cfg.text.sliding_window - 1, max_positions)
                  : max_positions;
    l.k.assign(size_t(l.slots * l.row), 0.0f);
    l.v.assign(size_t(l.slots * l.row), 0.0f);
    if (plan.is_donor) {
      l.own_chunk_k.assign(size_t(max_chunk * l.row), 0.0f);
      l.own_chunk_v.assign(size_t(max_chunk * l.row), 0.0f);
    } else {
      max_row = std::max(max_row, l.row);
    }
  }
  shared_chunk_k_.assign(size_t(max_chunk * max_row), 0.0f);
  shared_chunk_v_.assign(size_t(max_chunk * max_row), 0.0f);
  chunk_k_.assign(size_t(L), nullptr);
  chunk_v_.assign(size_t(L), nullptr);
  for (int i = 0; i < L; ++i) {
    Layer& l = layers_[size_t(i)];
    const bool own = !l.own_chunk_k.empty();
    chunk_k_[size_t(i)] = own ? l.own_chunk_k.data() : shared_chunk_k_.data();
    chunk_v_[size_t(i)] = own ? l.own_chunk_v.data() : shared_chunk_v_.data();
  }
}

KvView KvCache::view(int layer, int64_t pos0) const {
  const Layer& l = layers_[size_t(layer)];
  KvView v;
  v.cache_k = l.k.data();
  v.cache_v = l.v.data();
  v.slots = l.slots;
  v.cache_begin = std::max<int64_t>(0, pos0 - l.slots);
  v.chunk_k = chunk_k_[size_t(layer)];
  v.chunk_v = chunk_v_[size_t(layer)];
  return v;
}

void KvCache::commit(int layer, int64_t pos0, int64_t T) {
  Layer& l = layers_[size_t(layer)];
  const float* ck = chunk_k_[size_t(layer)];
  const float* cv = chunk_v_[size_t(layer)];
  const size_t row_bytes = size_t(l.row) * sizeof(float);
  for (int64_t t = std::max<int64_t>(0, T - l.slots); t < T; ++t) {
    const int64_t slot = (pos0 + t) % l.slots;
    std::memcpy(l.k.data() + slot * l.row, ck + t * l.row, row_bytes);
    std::memcpy(l.v.data() + slot * l.row, cv + t * l.row, row_bytes);
  }
}

size_t KvCache::bytes() const {
  size_t n = 0;
  for (const Layer& l : layers_) n += (l.k.size() + l.v.size()) * sizeof(float);
  return n;
}

}  // namespace infer
