// Cuts incoming tokens (KvBlock chunks from the eviction sink or from read_kv of a quiet span) into
// episodes of N tokens (issue 29 item 1), never taking the same position twice. Pure: no store,
// no codec, no clock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/kv_ring_api.h"

namespace infer::memory {

class EpisodeBuilder {
 public:
  explicit EpisodeBuilder(size_t episode_tokens = 64);

  // Takes b's tokens whose position is above every position taken so far (eviction and quiet
  // spans overlap: each position is taken once, from whichever source brings it first); b's
  // positions ascend. Every full episode this completes is appended to done, oldest first; a
  // partial tail waits for more. Under FIFO eviction positions leave in order, so nothing is
  // skipped that was not taken; under mass eviction a token older than the newest taken one is
  // dropped (it was in a quiet span or is lost: the rule that keeps positions unique).
  void add(const KvBlock& b, std::vector<KvBlock>* done);
  // The waiting tail (if any) as a short episode.
  void flush(std::vector<KvBlock>* done);

  size_t episode_tokens() const { return n_; }
  size_t pending() const { return tail_.size(); }
  // The highest position taken (-1: none yet).
  int64_t last_taken() const { return last_; }

 private:
  size_t n_;
  int64_t last_ = -1;
  KvBlock tail_;
};

// Appends token i of src (its position, id and rows of every layer) to dst (dst's layers are
// set from src when empty; otherwise they must match).
void append_token(const KvBlock& src, size_t i, KvBlock* dst);

}  // namespace infer::memory
