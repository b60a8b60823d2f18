// EvictionBuffer (memory/eviction_buffer.h): the decode thread's hand-over of evicted rows in
// episode-sized blocks, equal to what the ring evicted, without allocating per token, and
// counting rather than waiting when the consumer keeps every block.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "memory/eviction_buffer.h"
#include "model/cpu_forward.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "test/model/ring_test_util.h"
#include "test/test_paths.h"

namespace infer::memory {
namespace {

// The e2b-mini fixture on one thread, run through a ring of kAnchors + kWindow slots.
class EvictionBufferTest : public ::testing::Test {
 protected:
  static constexpr int64_t kAnchors = 2, kWindow = 16, kBatch = 8;
  void SetUp() override {
    auto m = Model::load(test::repo_fixtures() / "gemma4-text" / "e2b-mini",
                         LoadOptions{Quant::kAsStored, EmbedScale::kF32}, pool_);
    ASSERT_TRUE(m.ok()) << m.error().message;
    model_ = std::move(m).value();
  }
  std::unique_ptr<CpuForward> forward(int64_t recall) {
    return std::make_unique<CpuForward>(*model_, pool_, test::ring(kAnchors, kWindow, recall), 4);
  }
  // Decodes ids[0, n) one token at a time.
  static void decode(CpuForward& fwd, const std::vector<int32_t>& ids, int64_t n) {
    std::vector<float> logits(size_t(fwd.vocab_size()));
    for (int64_t p = 0; p < n; ++p) ASSERT_TRUE(fwd.decode(ids[size_t(p)], logits.data()).ok());
  }
  ThreadPool pool_{1};
  std::unique_ptr<Model> model_;
};

struct Everything final : EvictionSink {
  void on_evict(std::span<const EvictedToken> tokens, const KvRows& rows) override {
    block.append(tokens, rows);
  }
  KvBlock block;
};

// Both sinks see the same evictions: one forward pass feeds a tee.
struct Tee final : EvictionSink {
  void on_evict(std::span<const EvictedToken> tokens, const KvRows& rows) override {
    a->on_evict(tokens, rows);
    b->on_evict(tokens, rows);
  }
  EvictionSink *a, *b;
};

TEST_F(EvictionBufferTest, HandsOnEveryEvictedTokenInBlocksOfTheBatchWithItsRows) {
  const int64_t A = kAnchors, W = kWindow, batch = kBatch, n = 150;
  const auto fwd = forward(8);
  std::vector<std::unique_ptr<KvBlock>> got;
  EvictionBuffer* self = nullptr;
  EvictionBuffer buffer(batch, 2, [&](std::unique_ptr<KvBlock> b) {
    got.push_back(std::make_unique<KvBlock>(*b));  // the consumer copies and gives it back
    self->recycle(std::move(b));
  });
  self = &buffer;
  Everything everything;
  const KvBlock& all = everything.block;
  Tee tee;
  tee.a = &buffer;
  tee.b = &everything;
  fwd->set_eviction_sink(&tee);
  decode(*fwd, test::pseudo_ids(n, 512, 3), n);
  if (HasFatalFailure()) return;
  buffer.flush();

  const int64_t evicted = n - A - W;
  ASSERT_EQ(int64_t(all.size()), evicted);
  EXPECT_EQ(buffer.handed(), evicted);
  EXPECT_EQ(buffer.dropped(), 0);
  ASSERT_EQ(int64_t(got.size()), (evicted + batch - 1) / batch);
  size_t at = 0;
  for (const auto& b : got) {
    EXPECT_LE(int64_t(b->size()), batch);
    ASSERT_EQ(b->layers, all.layers);
    for (size_t t = 0; t < b->size(); ++t, ++at) {
      EXPECT_EQ(b->pos[t], all.pos[at]);
      EXPECT_EQ(b->ids[t], all.ids[at]);
    }
    for (size_t li = 0; li < b->layers.size(); ++li) {
      const size_t row = all.k[li].size() / all.size();
      const size_t first = at - b->size();
      EXPECT_TRUE(std::equal(b->k[li].begin(), b->k[li].end(), all.k[li].begin() + first * row));
      EXPECT_TRUE(std::equal(b->v[li].begin(), b->v[li].end(), all.v[li].begin() + first * row));
    }
  }
  EXPECT_EQ(at, all.size());
}

TEST_F(EvictionBufferTest, ABehindCustomerGrowsThePoolWhichIsKeptForReuse) {
  const int64_t A = kAnchors, W = kWindow, batch = kBatch, n = 100;
  const auto fwd = forward(0);
  std::vector<std::unique_ptr<KvBlock>> kept;
  EvictionBuffer buffer(batch, 2, [&](std::unique_ptr<KvBlock> b) { kept.push_back(std::move(b)); });
  fwd->set_eviction_sink(&buffer);
  const auto ids = test::pseudo_ids(n, 512, 5);
  decode(*fwd, ids, n);
  if (HasFatalFailure()) return;
  // Nothing lost while the consumer keeps every block (it learns its codebooks, say).
  const int64_t evicted = n - A - W, full = evicted / batch;
  EXPECT_EQ(buffer.dropped(), 0);
  EXPECT_EQ(buffer.handed(), full * batch);
  const int grown = buffer.blocks();
  EXPECT_EQ(grown, int(full) + 1);  // the full ones and the one being filled
  // Once it gives them back, the same blocks serve: no more are made.
  for (auto& b : kept) buffer.recycle(std::move(b));
  kept.clear();
  decode(*fwd, ids, 3 * batch);
  if (HasFatalFailure()) return;
  EXPECT_EQ(buffer.blocks(), grown);
  EXPECT_EQ(buffer.dropped(), 0);
}

TEST_F(EvictionBufferTest, ACustomerThatKeepsTheBlocksPastTheCapCostsTokensNotAStall) {
  const int64_t A = kAnchors, W = kWindow, batch = kBatch, n = 100;
  const auto fwd = forward(0);
  std::vector<std::unique_ptr<KvBlock>> kept;
  // max_bytes 0: no block beyond the two made up front.
  EvictionBuffer buffer(
      batch, 2, [&](std::unique_ptr<KvBlock> b) { kept.push_back(std::move(b)); }, 0);
  fwd->set_eviction_sink(&buffer);
  const auto ids = test::pseudo_ids(n, 512, 5);
  decode(*fwd, ids, n);
  if (HasFatalFailure()) return;
  EXPECT_EQ(kept.size(), 2u);
  EXPECT_EQ(buffer.handed(), 2 * batch);
  EXPECT_EQ(buffer.dropped(), n - A - W - 2 * batch);
  // Giving one back lets the next evictions through again.
  buffer.recycle(std::move(kept[0]));
  decode(*fwd, ids, batch);
  if (HasFatalFailure()) return;
  EXPECT_EQ(buffer.handed(), 3 * batch);
}

}  // namespace
}  // namespace infer::memory
