#include "memory/eviction_buffer.h"

#include <algorithm>
#include <utility>

namespace infer::memory {

EvictionBuffer::EvictionBuffer(int64_t batch_tokens, int pool_blocks, Handoff handoff,
                               size_t max_bytes)
    : batch_(batch_tokens), pool_(pool_blocks), max_bytes_(max_bytes),
      handoff_(std::move(handoff)) {}

std::unique_ptr<KvBlock> EvictionBuffer::make_block(const KvRows& rows) const {
  auto b = std::make_unique<KvBlock>();
  const std::span<const int> tl = rows.tiered_layers();
  b->layers.assign(tl.begin(), tl.end());
  b->pos.reserve(size_t(batch_));
  b->ids.reserve(size_t(batch_));
  b->k.resize(tl.size());
  b->v.resize(tl.size());
  for (size_t i = 0; i < tl.size(); ++i) {
    b->k[i].reserve(size_t(batch_ * rows.row_floats(tl[i])));
    b->v[i].reserve(size_t(batch_ * rows.row_floats(tl[i])));
  }
  return b;
}

KvBlock* EvictionBuffer::filling(const KvRows& rows) {
  if (current_) return current_.get();
  std::lock_guard lock(free_mu_);
  if (!allocated_) {  // the first eviction: the rows' shapes are known now
    size_t block_bytes = 0;
    for (int layer : rows.tiered_layers()) block_bytes += 2 * size_t(rows.row_floats(layer));
    block_bytes *= size_t(batch_) * sizeof(float);
    max_blocks_ = std::max(pool_, int(max_bytes_ / std::max<size_t>(block_bytes, 1)));
    free_.reserve(size_t(max_blocks_));  // recycle() never reallocates
    for (int i = 0; i < pool_; ++i) free_.push_back(make_block(rows));
    blocks_ = pool_;
    allocated_ = true;
  }
  if (free_.empty()) {
    if (blocks_ >= max_blocks_) return nullptr;
    // The consumer is behind: one more block, kept afterwards (not a steady-state cost).
    free_.push_back(make_block(rows));
    ++blocks_;
  }
  current_ = std::move(free_.back());
  free_.pop_back();
  return current_.get();
}

void EvictionBuffer::on_evict(std::span<const EvictedToken> tokens, const KvRows& rows) {
  for (const EvictedToken& t : tokens) {
    KvBlock* b = filling(rows);
    if (b == nullptr) {
      ++dropped_;
      continue;
    }
    // Within the reserved capacity: no allocation.
    b->pos.push_back(t.pos);
    b->ids.push_back(t.id);
    for (size_t i = 0; i < b->layers.size(); ++i) {
      const size_t row = size_t(rows.row_floats(b->layers[i]));
      std::vector<float>& k = b->k[i];
      std::vector<float>& v = b->v[i];
      k.resize(k.size() + row);
      v.resize(v.size() + row);
      rows.read_row(b->layers[i], t.slot, k.data() + k.size() - row, v.data() + v.size() - row);
    }
    if (int64_t(b->size()) == batch_) hand_on();
  }
}

void EvictionBuffer::hand_on() {
  handed_ += int64_t(current_->size());
  handoff_(std::move(current_));
}

void EvictionBuffer::flush() {
  if (current_ && current_->size() > 0) hand_on();
}

void EvictionBuffer::recycle(std::unique_ptr<KvBlock> block) {
  if (!block) return;
  block->pos.clear();  // clear() keeps the capacity
  block->ids.clear();
  for (auto& k : block->k) k.clear();
  for (auto& v : block->v) v.clear();
  std::lock_guard lock(free_mu_);
  free_.push_back(std::move(block));
}

}  // namespace infer::memory
