// The decode thread's side of ingestion (issue 29 item 5): an EvictionSink that copies the rows
// of evicted tokens into blocks it allocated up front and hands each full block (batch_tokens
// tokens, an episode's worth) to a consumer, which stores it in the background and gives the
// block back. Per token nothing is allocated and nothing waits. When the consumer falls behind
// (it learns its codebooks once, which takes a while) the pool grows by a block at a time, kept
// for reuse, up to max_bytes of blocks; only past that are tokens counted as dropped instead of
// stalling decode.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "model/kv_ring_api.h"

namespace infer::memory {

class EvictionBuffer final : public EvictionSink {
 public:
  using Handoff = std::function<void(std::unique_ptr<KvBlock>)>;
  // handoff runs on the decode thread: it must only queue the block (e.g. send a message).
  // pool_blocks are made at the first eviction; more, while the blocks made stay within
  // max_bytes, when none is free.
  EvictionBuffer(int64_t batch_tokens, int pool_blocks, Handoff handoff,
                 size_t max_bytes = size_t(256) << 20);

  void on_evict(std::span<const EvictedToken> tokens, const KvRows& rows) override;
  // Hands on the partial block now (e.g. before the process ends), if it holds any token.
  void flush();
  // A block the consumer is done with; any thread.
  void recycle(std::unique_ptr<KvBlock> block);

  int64_t batch_tokens() const { return batch_; }
  int64_t handed() const { return handed_; }    // tokens handed on
  int64_t dropped() const { return dropped_; }  // tokens lost because no block was free
  int blocks() const { return blocks_; }          // made so far

 private:
  // The block being filled, taking one from the free list; null when none is free.
  KvBlock* filling(const KvRows& rows);
  std::unique_ptr<KvBlock> make_block(const KvRows& rows) const;
  void hand_on();

  int64_t batch_ = 0;
  int pool_ = 0;
  size_t max_bytes_ = 0;
  int max_blocks_ = 0;  // from max_bytes_, once the rows' shapes are known
  int blocks_ = 0;
  Handoff handoff_;
  std::unique_ptr<KvBlock> current_;
  std::mutex free_mu_;
  std::vector<std::unique_ptr<KvBlock>> free_;
  bool allocated_ = false;
  int64_t handed_ = 0, dropped_ = 0;
};

}  // namespace infer::memory
