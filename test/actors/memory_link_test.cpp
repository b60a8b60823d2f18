// MemoryLink (actors/memory_link.h): a turn's recall must not wait for consolidation's encoding.
// A test hook stops the encoder inside an encode, holding it there until a recall has finished;
// the recall runs on another thread and must complete (with the episodes committed before), or
// the test fails after a generous deadline instead of hanging.
#include "actors/memory_link.h"

#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "test/memory/episodic_fixture.h"
#include "test/memory/kv_rows.h"

namespace infer::actors {
namespace {

using test::token_block;

class MemoryLinkTest : public test::EpisodicFixture {};

TEST_F(MemoryLinkTest, RecallCompletesWhileAnEpisodeIsBeingEncoded) {
  std::promise<void> encoding, recalled;
  std::shared_future<void> recalled_f = recalled.get_future().share();
  bool hold = false;  // set before the second store; read on the encoding thread only after
  int encodes = 0;
  options().before_encode = [&] {
    if (!hold || encodes++ != 0) return;
    encoding.set_value();
    // Held until the recall is done (or, if recall is blocked behind this encode, until the
    // main thread gives up and lets it go).
    recalled_f.wait_for(std::chrono::seconds(60));
  };
  MemoryLink link;
  link.memory = open_memory();
  ASSERT_TRUE(link.memory);
  link.recall_tokens = 64;
  // Five episodes stored: training and encoding as consolidation would.
  auto first = link.store(token_block(shapes(), 0, 320), false);
  ASSERT_TRUE(first.ok()) << first.error().message;
  ASSERT_EQ(*first, 5u);

  hold = true;
  std::future<Result<size_t>> second = std::async(std::launch::async, [&] {
    return link.store(token_block(shapes(), 320, 128), false);
  });
  encoding.get_future().wait();  // the encoder is inside an encode now
  std::future<std::vector<memory::RecallHit>> recall = std::async(std::launch::async, [&] {
    KvBlock rows;
    std::vector<memory::RecallHit> hits;
    const Result<void> r = link.recall(token_block(shapes(), 128, 16), 0, &rows, &hits);
    EXPECT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(rows.size(), hits.empty() ? 0u : 64u);
    return hits;
  });
  const bool in_time = recall.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  EXPECT_TRUE(in_time) << "recall waited for the encode";
  EXPECT_EQ(second.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "the encode finished before the recall: the test proved nothing";
  recalled.set_value();
  const std::vector<memory::RecallHit> hits = recall.get();
  ASSERT_FALSE(hits.empty());
  EXPECT_EQ(hits[0].pos0, 128);  // the episode holding the query's tokens
  const Result<size_t> stored = second.get();
  ASSERT_TRUE(stored.ok()) << stored.error().message;
  EXPECT_EQ(*stored, 2u);
  EXPECT_EQ(link.memory->store().size(), 7u);
  EXPECT_EQ(link.last_hits.size(), hits.size());
}

}  // namespace
}  // namespace infer::actors
