// KvBlock's one helper: copying rows out of a backend (eviction sinks, read_kv callers).
#include "model/kv_ring_api.h"

namespace infer {

void KvBlock::append(std::span<const EvictedToken> tokens, const KvRows& rows) {
  const std::span<const int> tl = rows.tiered_layers();
  if (layers.empty() && pos.empty()) {
    layers.assign(tl.begin(), tl.end());
    k.resize(layers.size());
    v.resize(layers.size());
  }
  for (const EvictedToken& e : tokens) {
    pos.push_back(e.pos);
    ids.push_back(e.id);
    for (size_t i = 0; i < layers.size(); ++i) {
      const int64_t row = rows.row_floats(layers[i]);
      k[i].resize(k[i].size() + size_t(row));
      v[i].resize(v[i].size() + size_t(row));
      rows.read_row(layers[i], e.slot, k[i].data() + k[i].size() - size_t(row),
                    v[i].data() + v[i].size() - size_t(row));
    }
  }
}

}  // namespace infer
