// Association keys (synthetic rows) and the dual score's rule.
#include "memory/association.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>
#include <algorithm>

namespace infer::memory {
namespace {

// n tokens of one layer (2 heads x 16): a shared common component plus a per-id direction.
KvBlock synthetic(const std::vector<int32_t>& ids) {
  KvBlock b;
  b.layers = {0};
  b.k.resize(1);
  b.v.resize(1);
  for (size_t i = 0; i < ids.size(); ++i) {
    b.pos.push_back(int64_t(i));
    b.ids.push_back(ids[i]);
    std::mt19937 g(uint32_t(ids[i]));
    std::normal_distribution<float> nd;
    for (int j = 0; j < 32; ++j) {
      b.k[0].push_back(5.0f + nd(g));  // the common component random weights give
      b.v[0].push_back(0.0f);
    }
  }
  return b;
}

std::vector<int32_t> ids(int n, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = int32_t(g() % 100000);
  return v;
}

TEST(Association, AnExcerptFindsItsEpisodeAndStateRoundTrips) {
  AssociationConfig cfg;
  Association a(cfg, {32}, {16});
  KvBlock fit = synthetic(ids(256, 99));
  a.fit(fit);
  const int E = 100;
  std::vector<float> keys(size_t(E) * a.key_floats());
  for (int e = 0; e < E; ++e) a.episode_key(synthetic(ids(64, uint32_t(e))), 0, 64, &keys[size_t(e) * a.key_floats()]);
  int hits = 0;
  std::vector<float> q(a.query_floats());
  for (int e = 0; e < E; e += 10) {
    KvBlock b = synthetic(ids(64, uint32_t(e)));
    a.query_key(b, size_t(e % 48), 16, q.data());
    int best = 0;
    for (int j = 1; j < E; ++j)
      if (a.association(q.data(), &keys[size_t(j) * a.key_floats()]) >
          a.association(q.data(), &keys[size_t(best) * a.key_floats()]))
        best = j;
    hits += best == e;
  }
  EXPECT_EQ(hits, E / 10);

  Association b(cfg, {32}, {16});
  ASSERT_TRUE(b.set_state(a.state()).ok());
  std::vector<float> k1(a.key_floats()), k2(a.key_floats());
  KvBlock x = synthetic(ids(64, 5));
  a.episode_key(x, 0, 64, k1.data());
  b.episode_key(x, 0, 64, k2.data());
  EXPECT_EQ(k1, k2);
  EXPECT_FALSE(b.set_state(std::vector<float>(3)).ok());
}

// Rows that carry only their context (seeded by ctx and the position), nothing of the token: what
// deep layers of a random model come close to.
KvBlock in_context(const std::vector<int32_t>& ids, uint32_t ctx) {
  KvBlock b;
  b.layers = {0};
  b.k.resize(1);
  b.v.resize(1);
  std::mt19937 g(ctx);
  std::normal_distribution<float> nd;
  for (size_t i = 0; i < ids.size(); ++i) {
    b.pos.push_back(int64_t(i));
    b.ids.push_back(ids[i]);
    for (int j = 0; j < 32; ++j) {
      b.k[0].push_back(5.0f + nd(g));
      b.v[0].push_back(0.0f);
    }
  }
  return b;
}

// How many of 10 excerpts (16 tokens, then `tail` unrelated tokens in the same query) rank their
// episode of 50 first.
int excerpts_found(const AssociationConfig& cfg, int tail = 0) {
  Association a(cfg, {32}, {16});
  a.fit(in_context(ids(256, 99), 99));
  const int E = 50;
  std::vector<float> keys(size_t(E) * a.key_floats()), q(a.query_floats());
  for (int e = 0; e < E; ++e)
    a.episode_key(in_context(ids(64, uint32_t(e)), uint32_t(e)), 0, 64, &keys[size_t(e) * a.key_floats()]);
  int hits = 0;
  for (int e = 0; e < E; e += 5) {
    const std::vector<int32_t> all = ids(64, uint32_t(e));
    const size_t off = size_t(e % 48);
    std::vector<int32_t> query(all.begin() + ptrdiff_t(off), all.begin() + ptrdiff_t(off + 16));
    const std::vector<int32_t> other = ids(tail, uint32_t(5000 + e));
    query.insert(query.end(), other.begin(), other.end());
    a.query_key(in_context(query, uint32_t(1000 + e)), 0, query.size(), q.data());
    int best = 0;
    for (int j = 1; j < E; ++j)
      if (a.association(q.data(), &keys[size_t(j) * a.key_floats()]) >
          a.association(q.data(), &keys[size_t(best) * a.key_floats()]))
        best = j;
    hits += best == e;
  }
  return hits;
}

TEST(Association, TokenIdsFindAnExcerptWhoseRowsCarryOnlyTheContext) {
  AssociationConfig cfg;
  ASSERT_GT(cfg.id_weight, 0.0f);
  EXPECT_EQ(excerpts_found(cfg), 10);
  cfg.id_weight = 0.0f;  // the rows alone: chance (1 in 50 a query)
  EXPECT_LE(excerpts_found(cfg), 2);
}

TEST(Association, ALongQueryIsCutIntoPartsSoTheMatchingPartIsNotDiluted) {
  AssociationConfig cfg;
  // Rows that carry only the context leave the ids alone to find the excerpt (the hardest case).
  cfg.query_parts = 4;
  EXPECT_EQ(excerpts_found(cfg, 48), 10);  // 64 tokens: four parts of 16
  const int parts4 = excerpts_found(cfg, 112);  // 128 tokens: four parts of 32
  cfg.query_parts = 1;  // one key of the whole query: the excerpt's share shrinks with its length
  EXPECT_LT(excerpts_found(cfg, 48), 10);
  EXPECT_LT(excerpts_found(cfg, 112), parts4);
}

TEST(Association, KeysMixRowsAndIdsByTheirWeight) {
  AssociationConfig cfg;
  cfg.sub_spans = 1;
  Association a(cfg, {32}, {16});
  a.fit(synthetic(ids(256, 99)));
  // The same ids over rows of another context: the ids part agrees, the rows part (nearly) not.
  const std::vector<int32_t> x = ids(16, 7);
  std::vector<float> k(a.key_floats()), q(a.query_floats());
  a.episode_key(in_context(x, 1), 0, 16, k.data());
  a.query_key(in_context(x, 2), 0, 16, q.data());
  EXPECT_NEAR(a.association(q.data(), k.data()), cfg.id_weight, 0.15);
  a.query_key(in_context(x, 1), 0, 16, q.data());  // the very same rows and ids
  EXPECT_NEAR(a.association(q.data(), k.data()), 1.0f, 1e-5);
}

// The portable dot's arithmetic, written out: two 4-lane partial sums over steps of 8, the
// lanes added in a fixed order, then the tail.
float reference_dot(const float* a, const float* b, size_t n) {
  float s0[4] = {0, 0, 0, 0}, s1[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 4; ++j) s0[j] += a[i + size_t(j)] * b[i + size_t(j)];
    for (int j = 0; j < 4; ++j) s1[j] += a[i + 4 + size_t(j)] * b[i + 4 + size_t(j)];
  }
  float s[4];
  for (int j = 0; j < 4; ++j) s[j] = s0[j] + s1[j];
  float t = (s[0] + s[1]) + (s[2] + s[3]);
  for (; i < n; ++i) t += a[i] * b[i];
  return t;
}

// Scoring may take a wider path on this CPU; it must give the same bits as the portable one, so
// a store ranks its episodes alike everywhere.
TEST(Association, ScoresAreTheSameBitsOnEveryPath) {
  for (const int dims : {256, 100}) {
    AssociationConfig cfg;
    cfg.dims = dims;
    Association a(cfg, {32}, {16});
    std::mt19937 rng(11);
    std::normal_distribution<float> g;
    std::vector<float> q(a.query_floats()), k(a.key_floats());
    for (int trial = 0; trial < 50; ++trial) {
      for (float& x : q) x = g(rng);
      for (float& x : k) x = g(rng);
      for (size_t parts = 1; parts <= size_t(cfg.query_parts); ++parts) {
        float best = 0.0f;
        for (size_t p = 0; p < parts; ++p)
          for (size_t s = 0; s < size_t(cfg.sub_spans); ++s)
            best = std::max(best, reference_dot(q.data() + p * size_t(dims),
                                                k.data() + s * size_t(dims), size_t(dims)));
        ASSERT_EQ(a.association(q.data(), k.data(), parts), best) << dims << " " << parts;
      }
    }
  }
}

// A recall splits the projections' rows between threads: the keys must be the one-thread keys
// bit for bit, also when the rows are not a multiple of the 16 the split is cut by, and for
// lengths that leave a tail of tokens past the wide path's groups of four.
TEST(Association, KeysWithAPoolAreTheSameBits) {
  ThreadPool pool(3);
  for (const int reduce : {128, 72}) {
    AssociationConfig cfg;
    cfg.reduce_dims = reduce;
    cfg.lift_dims = 200;
    Association a(cfg, {32}, {16});
    a.fit(synthetic(ids(256, 7)));
    for (const size_t n : {size_t(1), size_t(16), size_t(37), size_t(64)}) {
      const KvBlock b = synthetic(ids(64, uint32_t(n)));
      std::vector<float> q1(a.query_floats()), q2(a.query_floats());
      ASSERT_EQ(a.query_key(b, 0, n, q1.data()), a.query_key(b, 0, n, q2.data(), &pool));
      EXPECT_EQ(q1, q2) << reduce << " " << n;
      if (n >= size_t(cfg.sub_spans)) {
        std::vector<float> k1(a.key_floats()), k2(a.key_floats());
        a.episode_key(b, 0, n, k1.data());
        a.episode_key(b, 0, n, k2.data(), &pool);
        EXPECT_EQ(k1, k2) << reduce << " " << n;
      }
    }
  }
}

TEST(ScoreRule, StrengthOrdersTiesAndDecaysWithItsHalfLife) {
  ScoreRule r;
  const int64_t now = 10 * 86400000LL;
  // Same association: the stronger, then the more recent, wins.
  EXPECT_GT(r.score(0.5f, 3.0f, now, now), r.score(0.5f, 1.0f, now, now));
  EXPECT_GT(r.score(0.5f, 1.0f, now - 1000, now), r.score(0.5f, 1.0f, now - 86400000LL, now));
  EXPECT_NEAR(r.strength_now(4.0f, now - int64_t(r.half_life_ms), now), 2.0, 1e-9);
  // A clear association difference beats a much stronger episode.
  EXPECT_GT(r.score(0.6f, 1.0f, now, now), r.score(0.3f, 8.0f, now, now));
  EXPECT_FLOAT_EQ(r.after_recall(2.0f, now, now), 3.0f);
}

}  // namespace
}  // namespace infer::memory
