// EpisodeBuilder: whole episodes in position order, each position taken once.
#include "memory/episode_builder.h"

#include <gtest/gtest.h>

#include <set>

namespace infer::memory {
namespace {

// Tokens [p0, p0 + n): id = pos + 1000, rows of two layers (3 and 5 floats) that encode pos.
KvBlock block(int64_t p0, int64_t n) {
  KvBlock b;
  b.layers = {2, 4};
  b.k.resize(2);
  b.v.resize(2);
  for (int64_t p = p0; p < p0 + n; ++p) {
    b.pos.push_back(p);
    b.ids.push_back(int32_t(p + 1000));
    for (size_t l = 0; l < 2; ++l) {
      const int rf = l == 0 ? 3 : 5;
      for (int j = 0; j < rf; ++j) {
        b.k[l].push_back(float(p) + 0.01f * float(j));
        b.v[l].push_back(-float(p) - 0.01f * float(j));
      }
    }
  }
  return b;
}

void expect_consistent(const KvBlock& e) {
  for (size_t i = 0; i < e.size(); ++i) {
    EXPECT_EQ(e.ids[i], e.pos[i] + 1000);
    EXPECT_EQ(e.k[0][i * 3 + 2], float(e.pos[i]) + 0.02f);
    EXPECT_EQ(e.v[1][i * 5 + 4], -float(e.pos[i]) - 0.04f);
  }
}

TEST(EpisodeBuilder, CutsChunksIntoWholeEpisodesAndKeepsTheTailWaiting) {
  EpisodeBuilder b(64);
  std::vector<KvBlock> done;
  for (int64_t p = 0; p < 150; p += 10) b.add(block(p, 10), &done);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(b.pending(), 150u - 128u);
  for (size_t e = 0; e < 2; ++e) {
    ASSERT_EQ(done[e].size(), 64u);
    for (size_t i = 0; i < 64; ++i) EXPECT_EQ(done[e].pos[i], int64_t(e * 64 + i));
    expect_consistent(done[e]);
  }
  b.flush(&done);
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[2].size(), 22u);
  EXPECT_EQ(done[2].pos.front(), 128);
  EXPECT_EQ(b.pending(), 0u);
  b.flush(&done);
  EXPECT_EQ(done.size(), 3u);  // nothing waiting: nothing made
}

// Eviction brings [0, 100) in chunks; a quiet span read [80, 200) overlaps it; eviction later
// brings [100, 180) again: every position lands in exactly one episode.
TEST(EpisodeBuilder, NeverTakesAPositionTwiceFromOverlappingSources) {
  EpisodeBuilder b(16);
  std::vector<KvBlock> done;
  for (int64_t p = 0; p < 100; p += 7) b.add(block(p, std::min<int64_t>(7, 100 - p)), &done);
  b.add(block(80, 120), &done);  // quiet span: only [100, 200) is new
  b.add(block(100, 80), &done);  // evicted later: nothing new
  b.add(block(150, 70), &done);  // [200, 220) new
  b.flush(&done);
  std::set<int64_t> seen;
  size_t total = 0;
  for (const auto& e : done) {
    expect_consistent(e);
    for (size_t i = 0; i < e.size(); ++i) {
      EXPECT_TRUE(seen.insert(e.pos[i]).second) << "position " << e.pos[i] << " twice";
      if (i > 0) {
        EXPECT_GT(e.pos[i], e.pos[i - 1]);
      }
    }
    total += e.size();
  }
  EXPECT_EQ(total, 220u);
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), 219);
  EXPECT_EQ(b.last_taken(), 219);
  for (size_t e = 0; e + 1 < done.size(); ++e) EXPECT_EQ(done[e].size(), 16u);
}

}  // namespace
}  // namespace infer::memory
