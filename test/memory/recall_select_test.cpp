// RecallSelector (memory/recall_select.h): the coded first pass picks exactly what the fp32
// path picks (the same episodes in the same order, with the same association and score bits)
// on random stores, near-ties and exact ties, 0 and 1 episodes, 10,000 episodes, and where the
// walk outruns its guarantee; and it does rescore only a few keys.
#include "memory/recall_select.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace infer::memory {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;

class Store {
 public:
  explicit Store(const Association& a)
      : assoc_(a), index_(a.key_floats(), size_t(a.config().dims)) {}
  const KeyIndex& index() const { return index_; }
  void add(const std::vector<float>& key, uint32_t n_tokens, float strength, int64_t age_ms) {
    EpisodeInfo i;
    i.id = ++next_id_;
    i.n_tokens = n_tokens;
    i.strength = strength;
    i.written_ms = kNow - age_ms;
    index_.put(i, key);
  }

 private:
  const Association& assoc_;
  KeyIndex index_;
  uint64_t next_id_ = 0;
};

// Unit parts of D floats.
std::vector<float> unit_parts(std::mt19937& rng, size_t parts, size_t D) {
  std::normal_distribution<float> g;
  std::vector<float> v(parts * D);
  for (size_t p = 0; p < parts; ++p) {
    double n = 0;
    for (size_t i = 0; i < D; ++i) n += double(v[p * D + i] = g(rng)) * v[p * D + i];
    for (size_t i = 0; i < D; ++i) v[p * D + i] = float(v[p * D + i] / std::sqrt(n));
  }
  return v;
}

// x + spread * noise, each part made unit again.
std::vector<float> near(std::mt19937& rng, const std::vector<float>& x, size_t D, float spread) {
  std::vector<float> n = unit_parts(rng, x.size() / D, D), v(x.size());
  for (size_t p = 0; p < x.size() / D; ++p) {
    double s = 0;
    for (size_t i = p * D; i < (p + 1) * D; ++i) {
      v[i] = x[i] + spread * n[i];
      s += double(v[i]) * v[i];
    }
    for (size_t i = p * D; i < (p + 1) * D; ++i) v[i] = float(v[i] / std::sqrt(s));
  }
  return v;
}

struct Outcome {
  std::vector<RecallPick> picks;
  size_t rescored = 0;
  bool fell_back = false;
};

Outcome pick(RecallSelector& sel, const Association& a, const KeyIndex& index,
             const std::vector<float>& q, size_t parts, SelectOptions o, bool exact) {
  o.exact = exact;
  Outcome out;
  sel.select(a, index, q.data(), parts, o, &out.picks);
  out.rescored = sel.rescored();
  out.fell_back = sel.fell_back();
  return out;
}

// The fast path's picks are the exact path's, bit for bit; returns the fast outcome.
Outcome expect_alike(const Association& a, const KeyIndex& index, const std::vector<float>& q,
                     size_t parts, const SelectOptions& o) {
  RecallSelector sel;
  const Outcome exact = pick(sel, a, index, q, parts, o, true);
  const Outcome fast = pick(sel, a, index, q, parts, o, false);
  EXPECT_EQ(exact.rescored, index.size());
  EXPECT_EQ(fast.picks.size(), exact.picks.size());
  for (size_t i = 0; i < std::min(fast.picks.size(), exact.picks.size()); ++i) {
    EXPECT_EQ(fast.picks[i].index, exact.picks[i].index) << i;
    EXPECT_EQ(std::memcmp(&fast.picks[i].association, &exact.picks[i].association, 4), 0) << i;
    EXPECT_EQ(std::memcmp(&fast.picks[i].score, &exact.picks[i].score, 8), 0) << i;
  }
  // The same order as a plain sort of every key by (score, id) would give.
  std::vector<std::pair<double, uint64_t>> all;
  for (size_t k = 0; k < index.size(); ++k) {
    const float as = a.association(q.data(), index.key(k), parts);
    const EpisodeInfo& i = index.info(k);
    if (as >= o.min_association)
      all.push_back({-o.rule.score(as, i.strength, i.written_ms, o.now_ms), i.id});
  }
  std::sort(all.begin(), all.end());
  size_t j = 0;
  for (const RecallPick& p : exact.picks) {
    while (j < all.size() && all[j].second != index.info(p.index).id) ++j;
    EXPECT_LT(j, all.size()) << "a pick out of order";
  }
  return fast;
}

AssociationConfig config(int dims) {
  AssociationConfig c;
  c.dims = dims;
  return c;
}

TEST(RecallSelect, PicksWhatTheExactPathPicksOnRandomStores) {
  std::mt19937 rng(1);
  for (const int dims : {256, 40}) {
    const Association a(config(dims), {32}, {16});
    const size_t D = size_t(dims), S = size_t(a.config().sub_spans);
    for (const size_t n : {0, 1, 2, 17, 300}) {
      Store st(a);
      std::uniform_int_distribution<int> len(0, 4);
      std::uniform_real_distribution<float> strength(0.3f, 6.0f);
      for (size_t k = 0; k < n; ++k) {
        const uint32_t lens[] = {64, 64, 64, 20, 5};
        st.add(unit_parts(rng, S, D), lens[len(rng)], strength(rng),
               int64_t(rng() % 200'000'000));
      }
      for (int trial = 0; trial < 12; ++trial) {
        const size_t parts = 1 + size_t(trial % 4);
        std::vector<float> q(a.query_floats(), 0.0f);
        const std::vector<float> u = unit_parts(rng, parts, D);
        std::copy(u.begin(), u.end(), q.begin());
        // Half the time the query's first part is a near copy of some key's part 2.
        if (n > 0 && trial % 2 == 0) {
          const float* k = st.index().key(rng() % n) + 2 * D;
          const std::vector<float> c = near(rng, std::vector<float>(k, k + D), D, 0.3f);
          std::copy(c.begin(), c.end(), q.begin());
        }
        SelectOptions o;
        o.now_ms = kNow;
        const float mins[] = {-1.0f, 0.0f, 0.2f, 0.5f};
        o.min_association = mins[trial % 4];
        const size_t budgets[] = {64, 128, 200};
        o.budget_tokens = budgets[trial % 3];
        SCOPED_TRACE(testing::Message() << "dims " << dims << " n " << n << " trial " << trial);
        expect_alike(a, st.index(), q, parts, o);
      }
    }
  }
}

// Equal scores (copies of one key, same strength and age) go by id; keys a hair apart (inside
// any bound the codes give) are ranked by their fp32 scores.
TEST(RecallSelect, TiesGoToTheOlderEpisodeAndNearTiesByTheirFp32Scores) {
  std::mt19937 rng(2);
  const Association a(config(256), {32}, {16});
  const size_t D = 256, S = 4;
  Store st(a);
  const std::vector<float> base = unit_parts(rng, S, D);
  for (int k = 0; k < 40; ++k) st.add(base, 64, 1.0f, 1000);          // exact ties
  for (int k = 0; k < 40; ++k) st.add(near(rng, base, D, 1e-6f), 64, 1.0f, 1000);
  for (int k = 0; k < 40; ++k) st.add(unit_parts(rng, S, D), 64, 1.0f, 1000);
  std::vector<float> q(a.query_floats(), 0.0f);
  const std::vector<float> c = near(rng, std::vector<float>(base.begin(), base.begin() + D), D,
                                    0.5f);
  std::copy(c.begin(), c.end(), q.begin());
  SelectOptions o;
  o.now_ms = kNow;
  o.budget_tokens = 128;
  const Outcome fast = expect_alike(a, st.index(), q, 1, o);
  ASSERT_EQ(fast.picks.size(), 2u);
  EXPECT_GE(fast.picks[0].score, fast.picks[1].score);
  if (fast.picks[0].score == fast.picks[1].score) {
    EXPECT_LT(st.index().info(fast.picks[0].index).id, st.index().info(fast.picks[1].index).id);
  }
  // Only the copies: every score equal, so the two oldest.
  Store ties(a);
  for (int k = 0; k < 30; ++k) ties.add(base, 64, 1.0f, 1000);
  const Outcome t = expect_alike(a, ties.index(), q, 1, o);
  ASSERT_EQ(t.picks.size(), 2u);
  EXPECT_EQ(ties.index().info(t.picks[0].index).id, 1u);
  EXPECT_EQ(ties.index().info(t.picks[1].index).id, 2u);
}

// 10,000 episodes spread around one key (as the bench's store: every score within a few
// hundredths) and 100 unrelated: the same picks, from a few dozen keys in fp32.
TEST(RecallSelect, TenThousandEpisodesPickAlikeFromAFewDozenRescored) {
  std::mt19937 rng(3);
  const Association a(config(256), {32}, {16});
  const size_t D = 256, S = 4;
  Store st(a);
  const std::vector<float> base = unit_parts(rng, S, D);
  for (int k = 0; k < 10000; ++k) st.add(near(rng, base, D, 0.3f), 64, 1.0f + float(k % 3), k);
  for (int k = 0; k < 100; ++k) st.add(unit_parts(rng, S, D), 64, 1.0f, 0);
  for (const size_t parts : {2, 4}) {
    std::vector<float> q(a.query_floats(), 0.0f);
    const std::vector<float> u = unit_parts(rng, parts, D);
    std::copy(u.begin(), u.end(), q.begin());
    for (const float min : {-1.0f, 0.2f}) {
      SelectOptions o;
      o.now_ms = kNow;
      o.min_association = min;
      const Outcome fast = expect_alike(a, st.index(), q, parts, o);
      EXPECT_FALSE(fast.fell_back);
      EXPECT_LT(fast.rescored, 500u) << parts << " " << min;
    }
  }
}

// Many one-token episodes and a budget of 128: the walk goes past the kCandidates it was
// promised, so the fast path starts over on the exact one, and still agrees.
TEST(RecallSelect, AWalkPastItsGuaranteeFallsBackAndStillAgrees) {
  std::mt19937 rng(4);
  const Association a(config(256), {32}, {16});
  Store st(a);
  for (int k = 0; k < 500; ++k) st.add(unit_parts(rng, 4, 256), 1, 1.0f, 0);
  std::vector<float> q(a.query_floats(), 0.0f);
  const std::vector<float> u = unit_parts(rng, 1, 256);
  std::copy(u.begin(), u.end(), q.begin());
  SelectOptions o;
  o.now_ms = kNow;
  o.min_association = -1.0f;
  o.budget_tokens = 128;
  const Outcome fast = expect_alike(a, st.index(), q, 1, o);
  EXPECT_TRUE(fast.fell_back);
  EXPECT_EQ(fast.picks.size(), 128u);
}

}  // namespace
}  // namespace infer::memory
