// EpisodicMemory (memory/episodic_memory.h): the store sized from the codec configuration alone
// (exactly as learned codecs size it, so files made before still open), training on what waits,
// and ingesting in two halves: nothing is stored or recalled until commit.
#include "memory/episodic_memory.h"

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model/config.h"
#include "test/memory/episodic_fixture.h"
#include "test/memory/kv_rows.h"

namespace infer::memory {
namespace {

using test::token_block;

class EpisodicMemoryTest : public test::EpisodicFixture {};

// The sizes EpisodicMemory::open gave before it computed them: a codec learned per head dim on
// synthetic rows, asked for its row and blob bytes (the store's geometry must not change).
TEST_F(EpisodicMemoryTest, OpenSizesTheStoreAsLearnedCodecsDo) {
  auto m = open_memory();
  ASSERT_TRUE(m);
  size_t row_bytes_per_token = 0, codebook_bytes = 64;
  for (const TieredShape& s : shapes()) {
    SrvqConfig c = options().srvq;
    c.dim = s.head_dim;
    c.iterations = 1;
    auto codec = SrvqCodec::train(c, test::structured_rows(512, s.head_dim, 3));
    ASSERT_TRUE(codec.ok()) << codec.error().message;
    row_bytes_per_token += 2 * size_t(s.num_key_value_heads) * codec->row_bytes();
    codebook_bytes += 2 * (codec->serialize().size() + 4);
  }
  std::vector<int> row_floats, head_dim;
  for (const TieredShape& s : shapes()) {
    row_floats.push_back(s.row_floats());
    head_dim.push_back(s.head_dim);
  }
  const Association a(options().association, row_floats, head_dim);
  codebook_bytes += 4 + 4 * a.state_floats() + 64;
  const StoreGeometry& g = m->store().geometry();
  EXPECT_EQ(g.payload_bytes, row_bytes_per_token * options().episode_tokens);
  EXPECT_EQ(g.codebook_bytes, codebook_bytes);
  EXPECT_EQ(g.key_floats, a.key_floats());
  // The learned codebooks fit the room made for them.
  ASSERT_TRUE(m->ingest(token_block(shapes(), 0, 320)).ok());
  EXPECT_FALSE(m->store().codebooks().empty());
  EXPECT_LE(m->store().codebooks().size(), g.codebook_bytes);
}

TEST_F(EpisodicMemoryTest, EpisodesWaitForTrainingAndFlushTrainsOnWhatThereIs) {
  auto m = open_memory();
  ASSERT_TRUE(m);
  auto stored = m->ingest(token_block(shapes(), 0, 100));
  ASSERT_TRUE(stored.ok()) << stored.error().message;
  EXPECT_EQ(*stored, 0u);  // one whole episode waits: 100 < train_tokens rows seen
  EXPECT_TRUE(m->store().codebooks().empty());
  stored = m->flush();
  ASSERT_TRUE(stored.ok()) << stored.error().message;
  EXPECT_EQ(*stored, 2u);  // [0, 64) and the tail [64, 100)
  const auto l = m->store().list();
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0].pos0, 0);
  EXPECT_EQ(l[1].pos0, 64);
  EXPECT_EQ(l[1].n_tokens, 36u);
  EXPECT_FALSE(m->store().codebooks().empty());
}

TEST_F(EpisodicMemoryTest, PreparedEpisodesAreStoredAndRecalledOnlyOnceCommitted) {
  auto m = open_memory();
  ASSERT_TRUE(m);
  auto p = m->prepare_ingest(token_block(shapes(), 0, 320));
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_EQ(p->episodes.size(), 5u);  // 320 >= train_tokens: trained, all five encoded
  ASSERT_TRUE(p->learned);
  EXPECT_EQ(m->store().size(), 0u);
  EXPECT_TRUE(m->store().codebooks().empty());
  const KvBlock query = token_block(shapes(), 192 + 16, 16);  // a quarter of episode 4
  KvBlock rows;
  std::vector<RecallHit> hits;
  ASSERT_TRUE(m->recall(query, 64, &rows, &hits).ok());
  EXPECT_TRUE(hits.empty());  // nothing committed: nothing to recall

  auto stored = m->commit(std::move(p).value());
  ASSERT_TRUE(stored.ok()) << stored.error().message;
  EXPECT_EQ(*stored, 5u);
  EXPECT_FALSE(m->store().codebooks().empty());
  ASSERT_TRUE(m->recall(query, 64, &rows, &hits).ok());
  ASSERT_FALSE(hits.empty());
  EXPECT_EQ(hits[0].pos0, 192);
  EXPECT_EQ(rows.size(), 64u);

  m.reset();  // a later process: the codebooks came back with the file
  m = open_memory();
  ASSERT_TRUE(m);
  ASSERT_TRUE(m->recall(query, 64, &rows, &hits).ok());
  ASSERT_FALSE(hits.empty());
  EXPECT_EQ(hits[0].pos0, 192);
}

// The coded first pass (the default) and the fp32 path recall the same episodes, in the same
// order, with the same association and score bits, and place the same rows: with nothing
// stored, one episode, and five (excerpts of each, an unrelated query, every length of query
// part count, budgets of one and two episodes, and no floor on the association).
TEST_F(EpisodicMemoryTest, TheCodedFirstPassRecallsWhatEveryKeyInFp32Recalls) {
  for (const int64_t tokens : {0, 64, 320}) {
    SCOPED_TRACE(tokens);
    std::filesystem::remove(options().path);
    options().train_tokens = 64;
    auto m = open_memory();
    ASSERT_TRUE(m);
    if (tokens > 0) {
      auto p = m->prepare_ingest(token_block(shapes(), 0, tokens));
      ASSERT_TRUE(p.ok()) << p.error().message;
      ASSERT_TRUE(m->commit(std::move(p).value()).ok());
    }
    std::vector<KvBlock> queries;
    for (int64_t e = 0; e < 5; ++e) queries.push_back(token_block(shapes(), e * 64 + 16, 16));
    queries.push_back(token_block(shapes(), 5000, 40, 7));
    queries.push_back(token_block(shapes(), 100, 128));
    for (const float min : {0.2f, -1.0f}) {
      m.reset();
      options().min_association = min;
      options().recall_tokens = 128;
      m = open_memory();
      ASSERT_TRUE(m);
      for (const KvBlock& q : queries) {
        for (const size_t budget : {64, 128}) {
          KvBlock fast_rows, exact_rows;
          std::vector<RecallHit> fast, exact;
          m->set_exact_recall(true);
          ASSERT_TRUE(m->recall(q, budget, &exact_rows, &exact).ok());
          m->set_exact_recall(false);
          ASSERT_TRUE(m->recall(q, budget, &fast_rows, &fast).ok());
          ASSERT_EQ(fast.size(), exact.size());
          for (size_t i = 0; i < fast.size(); ++i) {
            EXPECT_EQ(fast[i].id, exact[i].id);
            EXPECT_EQ(std::memcmp(&fast[i].association, &exact[i].association, 4), 0);
            EXPECT_EQ(std::memcmp(&fast[i].score, &exact[i].score, 8), 0);
          }
          EXPECT_EQ(fast_rows.pos, exact_rows.pos);
          EXPECT_EQ(fast_rows.k, exact_rows.k);
          EXPECT_EQ(fast_rows.v, exact_rows.v);
          if (tokens > 0 && min < 0) {
            EXPECT_FALSE(fast.empty());
          }
        }
      }
    }
    options().min_association = 0.2f;
    options().recall_tokens = 64;
  }
}

// A recall's query key and decode split between threads (recall_threads, the forward's count):
// the same hits and the same rows, bit for bit, as on the calling thread alone.
TEST_F(EpisodicMemoryTest, RecallWithThreadsGivesTheOneThreadHitsAndRows) {
  options().train_tokens = 64;
  options().min_association = -1.0f;
  options().recall_tokens = 128;
  {
    auto m = open_memory();
    ASSERT_TRUE(m);
    auto p = m->prepare_ingest(token_block(shapes(), 0, 320));
    ASSERT_TRUE(p.ok()) << p.error().message;
    ASSERT_TRUE(m->commit(std::move(p).value()).ok());
  }
  std::vector<KvBlock> queries = {token_block(shapes(), 16, 16), token_block(shapes(), 100, 128),
                                  token_block(shapes(), 5000, 40, 7)};
  std::vector<std::vector<RecallHit>> hits[2];
  std::vector<KvBlock> rows[2];
  for (const int threads : {1, 3}) {
    options().recall_threads = threads;
    auto m = open_memory();
    ASSERT_TRUE(m);
    for (const KvBlock& q : queries) {
      KvBlock out;
      std::vector<RecallHit> h;
      ASSERT_TRUE(m->recall(q, 128, &out, &h).ok());
      EXPECT_FALSE(h.empty());
      hits[threads > 1].push_back(h);
      rows[threads > 1].push_back(std::move(out));
    }
  }
  for (size_t i = 0; i < queries.size(); ++i) {
    ASSERT_EQ(hits[0][i].size(), hits[1][i].size());
    for (size_t j = 0; j < hits[0][i].size(); ++j) {
      EXPECT_EQ(hits[0][i][j].id, hits[1][i][j].id);
      EXPECT_EQ(std::memcmp(&hits[0][i][j].association, &hits[1][i][j].association, 4), 0);
    }
    EXPECT_EQ(rows[0][i].pos, rows[1][i].pos);
    EXPECT_EQ(rows[0][i].ids, rows[1][i].ids);
    EXPECT_EQ(rows[0][i].k, rows[1][i].k);
    EXPECT_EQ(rows[0][i].v, rows[1][i].v);
  }
  options().recall_threads = 1;
  options().min_association = 0.2f;
  options().recall_tokens = 64;
}

}  // namespace
}  // namespace infer::memory
