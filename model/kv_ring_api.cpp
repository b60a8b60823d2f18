// KvBlock's copying of rows out of a backend (eviction sinks, read_kv callers), and the recall
// and read_kv logic both backends share.
#include "model/kv_ring_api.h"

#include <string>

namespace infer {

void KvRows::read_rows(std::span<const int32_t> slots, std::span<float* const> k,
                       std::span<float* const> v) const {
  const std::span<const int> layers = tiered_layers();
  for (size_t i = 0; i < layers.size(); ++i) {
    const size_t row = size_t(row_floats(layers[i]));
    for (size_t j = 0; j < slots.size(); ++j) {
      read_row(layers[i], slots[j], k[i] + j * row, v[i] + j * row);
    }
  }
}

void KvBlock::append(std::span<const EvictedToken> tokens, const KvRows& rows) {
  const std::span<const int> tl = rows.tiered_layers();
  if (layers.empty() && pos.empty()) {
    layers.assign(tl.begin(), tl.end());
    k.resize(layers.size());
    v.resize(layers.size());
  }
  std::vector<int32_t> slots;
  slots.reserve(tokens.size());
  for (const EvictedToken& e : tokens) {
    pos.push_back(e.pos);
    ids.push_back(e.id);
    slots.push_back(e.slot);
  }
  std::vector<float*> k_at(layers.size()), v_at(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    const size_t grow = tokens.size() * size_t(rows.row_floats(layers[i]));
    k[i].resize(k[i].size() + grow);
    v[i].resize(v[i].size() + grow);
    k_at[i] = k[i].data() + k[i].size() - grow;
    v_at[i] = v[i].data() + v[i].size() - grow;
  }
  rows.read_rows(slots, k_at, v_at);
}

Result<void> place_recall(KvRing& ring, const KvRows& rows, const KvBlock& b,
                          const WriteKvRow& write_row) {
  const std::span<const int> layers = rows.tiered_layers();
  const size_t n = b.size();
  bool ok = b.ids.size() == n && b.layers.size() == layers.size() && b.k.size() == layers.size() &&
            b.v.size() == layers.size();
  for (size_t i = 0; ok && i < layers.size(); ++i) {
    const size_t want = n * size_t(rows.row_floats(layers[i]));
    ok = b.layers[i] == layers[i] && b.k[i].size() == want && b.v[i].size() == want;
  }
  if (!ok) {
    return make_error(ErrorCode::kInvalidArgument,
                      "set_recall: the block's layers or row sizes do not match this model's "
                      "tiered layers");
  }
  INFER_TRY_VOID(ring.set_recall(b.pos, b.ids));
  const int32_t base = int32_t(ring.config().anchors + ring.config().window);
  for (size_t i = 0; i < layers.size(); ++i) {
    const size_t row = size_t(rows.row_floats(layers[i]));
    for (size_t j = 0; j < n; ++j) {
      INFER_TRY_VOID(write_row(layers[i], base + int32_t(j), b.k[i].data() + j * row,
                               b.v[i].data() + j * row));
    }
  }
  return Ok{};
}

Result<void> read_ring_kv(const KvRing& ring, const KvRows& rows, int64_t pos, int64_t n,
                          KvBlock* out) {
  std::vector<EvictedToken> tokens;  // the same record: position, id and where the rows are
  for (int64_t p = pos; p < pos + n; ++p) {
    const int32_t slot = ring.find(p);
    if (slot < 0) {
      return make_error(ErrorCode::kNotFound,
                        "read_kv: position " + std::to_string(p) + " is not in the ring");
    }
    tokens.push_back(EvictedToken{p, ring.id_of(slot), slot});
  }
  *out = KvBlock{};
  out->append(tokens, rows);
  return Ok{};
}

}  // namespace infer
