// KvRing: slot bookkeeping of the 3-tier KV ring. A chunk first fills the anchors, then the free
// window slots, then evicts (FIFO: the oldest; mass: the least attended, newest protected) and
// reuses the victims' slots. The window's order is kept by logical position, so cache positions
// compress evicted gaps: whatever is evicted, the chunk sees a gap-free run of positions
// [0, n_keys + T), bounded by A + W + R + T for ever (StreamingLLM).
#include "model/kv_ring.h"

#include <algorithm>
#include <string>

#include "base/check.h"

namespace infer {

Result<void> validate(const RingConfig& c) {
  if (c.anchors < 0 || c.window < 1 || c.recall < 0 || c.recall > kMaxRecall) {
    return make_error(ErrorCode::kInvalidArgument,
                      "KV ring: anchors " + std::to_string(c.anchors) + ", window " +
                          std::to_string(c.window) + ", recall " + std::to_string(c.recall) +
                          " (need anchors >= 0, window >= 1, 0 <= recall <= " +
                          std::to_string(kMaxRecall) + ")");
  }
  return Ok{};
}

KvRing::KvRing(const RingConfig& cfg) : cfg_(cfg) {
  INFER_CHECK(validate(cfg).ok(), "bad ring config A %lld W %lld R %lld", (long long)cfg.anchors,
              (long long)cfg.window, (long long)cfg.recall);
  const int64_t W = cfg.window;
  protect_ = cfg.protect_recent < 0 ? std::min<int64_t>(32, W / 4) : cfg.protect_recent;
  protect_ = std::clamp<int64_t>(protect_, 0, W - 1);
  const size_t n = size_t(capacity());
  pos_.assign(n, -1);
  id_.assign(n, 0);
  mass_.assign(n, 0.0f);
  is_victim_.assign(n, 0);
  order_.assign(size_t(W), 0);
  key_slots_.assign(n, 0);
  write_slots_.assign(size_t(max_chunk()), 0);
  victims_.assign(size_t(W), 0);
  evicted_.assign(size_t(W), EvictedToken{});
}

int64_t KvRing::max_chunk() const {
  return cfg_.evict == EvictPolicy::kMass ? cfg_.window - protect_ : cfg_.window;
}

void KvRing::choose_victims(int64_t k) {
  int32_t* v = victims_.data();
  if (k == 0) return;
  if (cfg_.evict == EvictPolicy::kFifo) {
    std::copy_n(order_.begin(), k, v);
    return;
  }
  // The k least attended of the unprotected (older) part; ties go to the older token.
  const int64_t n = n_window_ - protect_;
  INFER_CHECK(k <= n, "mass eviction of %lld tokens, %lld unprotected", (long long)k,
              (long long)n);
  std::copy_n(order_.begin(), n, v);
  auto less = [&](int32_t a, int32_t b) {
    return mass_[size_t(a)] != mass_[size_t(b)] ? mass_[size_t(a)] < mass_[size_t(b)]
                                                : pos_[size_t(a)] < pos_[size_t(b)];
  };
  if (k < n) std::nth_element(v, v + k, v + n, less);
  std::sort(v, v + k, [&](int32_t a, int32_t b) { return pos_[size_t(a)] < pos_[size_t(b)]; });
}

const RingPlan& KvRing::plan(int64_t pos0, const int32_t* ids, int64_t T) {
  INFER_CHECK(T >= 1 && T <= max_chunk(), "chunk of %lld tokens, ring takes %lld", (long long)T,
              (long long)max_chunk());
  const int64_t A = cfg_.anchors, W = cfg_.window;
  // Attended: anchors, then recall (placed before the window), then the window oldest first.
  int64_t n = 0;
  for (int64_t a = 0; a < n_anchors_; ++a) key_slots_[size_t(n++)] = int32_t(a);
  for (int64_t r = 0; r < n_recall_; ++r) key_slots_[size_t(n++)] = int32_t(A + W + r);
  for (int64_t i = 0; i < n_window_; ++i) key_slots_[size_t(n++)] = order_[size_t(i)];

  fill_anchors_ = std::min(A - n_anchors_, T);
  const int64_t to_window = T - fill_anchors_;
  const int64_t to_free = std::min(W - n_window_, to_window);
  const int64_t k = to_window - to_free;  // > 0 only when the window is full
  choose_victims(k);
  int64_t t = 0;
  for (; t < fill_anchors_; ++t) write_slots_[size_t(t)] = int32_t(n_anchors_ + t);
  for (int64_t j = 0; j < to_free; ++j, ++t) {
    write_slots_[size_t(t)] = window_slot(n_window_ + j);
  }
  for (int64_t j = 0; j < k; ++j, ++t) {
    const int32_t s = victims_[size_t(j)];
    write_slots_[size_t(t)] = s;
    evicted_[size_t(j)] = EvictedToken{pos_[size_t(s)], id_[size_t(s)], s};
  }
  // ids are only needed at commit, which writes them here; plan_ points at this chunk's ids.
  chunk_ids_ = ids;
  plan_ = RingPlan{pos0,
                   T,
                   n,
                   std::span<const int32_t>(key_slots_.data(), size_t(n)),
                   std::span<const int32_t>(write_slots_.data(), size_t(T)),
                   std::span<const EvictedToken>(evicted_.data(), size_t(k))};
  return plan_;
}

void KvRing::add_mass(const float* mass) {
  for (int64_t i = 0; i < plan_.n_keys; ++i) mass_[size_t(plan_.key_slots[size_t(i)])] += mass[i];
}

void KvRing::commit() {
  const RingPlan& p = plan_;
  for (int64_t t = 0; t < p.T; ++t) {
    const size_t s = size_t(p.write_slots[size_t(t)]);
    pos_[s] = p.pos0 + t;
    id_[s] = chunk_ids_[t];
    mass_[s] = 0.0f;
  }
  n_anchors_ += fill_anchors_;
  // The window: victims leave the order, the chunk's window tokens join at its end.
  for (const EvictedToken& e : p.evicted) is_victim_[size_t(e.slot)] = 1;
  int64_t kept = 0;
  for (int64_t i = 0; i < n_window_; ++i) {
    const int32_t s = order_[size_t(i)];
    if (!is_victim_[size_t(s)]) order_[size_t(kept++)] = s;
  }
  for (const EvictedToken& e : p.evicted) is_victim_[size_t(e.slot)] = 0;
  for (int64_t t = fill_anchors_; t < p.T; ++t) order_[size_t(kept++)] = p.write_slots[size_t(t)];
  n_window_ = kept;
  fill_anchors_ = 0;
  plan_ = RingPlan{};
}

Result<void> KvRing::set_recall(std::span<const int64_t> pos, std::span<const int32_t> ids) {
  if (pos.size() != ids.size() || int64_t(pos.size()) > cfg_.recall) {
    return make_error(ErrorCode::kInvalidArgument,
                      "recall: " + std::to_string(pos.size()) + " positions, " +
                          std::to_string(ids.size()) + " ids, the tier holds " +
                          std::to_string(cfg_.recall));
  }
  const int64_t base = cfg_.anchors + cfg_.window;
  // New rows: the attention the tier's old rows received is not theirs (mass_of reads it).
  std::fill_n(mass_.begin() + base, cfg_.recall, 0.0f);
  for (size_t i = 0; i < pos.size(); ++i) {
    pos_[size_t(base) + i] = pos[i];
    id_[size_t(base) + i] = ids[i];
  }
  n_recall_ = int64_t(pos.size());
  return Ok{};
}

void KvRing::reset() {
  n_anchors_ = n_window_ = n_recall_ = 0;
  std::fill(pos_.begin(), pos_.end(), -1);
  std::fill(mass_.begin(), mass_.end(), 0.0f);
  plan_ = RingPlan{};
}

void KvRing::synthesize_context(int64_t n) {
  reset();
  const int64_t A = cfg_.anchors, W = cfg_.window;
  n_anchors_ = std::min(A, n);
  for (int64_t a = 0; a < n_anchors_; ++a) pos_[size_t(a)] = a;
  const int64_t first = std::max(A, n - W);
  n_window_ = std::max<int64_t>(0, n - first);
  for (int64_t i = 0; i < n_window_; ++i) {
    order_[size_t(i)] = window_slot(i);
    pos_[size_t(window_slot(i))] = first + i;
  }
}

int32_t KvRing::find(int64_t pos) const {
  if (pos >= 0 && pos < n_anchors_) return int32_t(pos);
  const auto end = order_.begin() + n_window_;
  const auto it = std::lower_bound(order_.begin(), end, pos, [&](int32_t s, int64_t p) {
    return pos_[size_t(s)] < p;
  });
  return it != end && pos_[size_t(*it)] == pos ? *it : -1;
}

}  // namespace infer
