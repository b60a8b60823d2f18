// KvRing's bookkeeping alone (model/kv_ring.h): slots, attention order and cache positions,
// evictions under FIFO and mass, recall placement, lookups.
#include "model/kv_ring.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace infer {
namespace {

RingConfig config(int64_t A, int64_t W, int64_t R, EvictPolicy p = EvictPolicy::kFifo,
                  int64_t protect = -1) {
  RingConfig c;
  c.anchors = A;
  c.window = W;
  c.recall = R;
  c.evict = p;
  c.protect_recent = protect;
  return c;
}

// Streams n tokens (id = 1000 + position) in chunks of `chunk`, collecting evicted positions.
std::vector<int64_t> stream(KvRing& r, int64_t n, int64_t chunk, int64_t* pos) {
  std::vector<int64_t> evicted;
  std::vector<int32_t> ids(static_cast<size_t>(chunk));
  while (*pos < n) {
    const int64_t T = std::min(chunk, n - *pos);
    for (int64_t t = 0; t < T; ++t) ids[size_t(t)] = int32_t(1000 + *pos + t);
    const RingPlan& p = r.plan(*pos, ids.data(), T);
    for (const EvictedToken& e : p.evicted) {
      EXPECT_EQ(e.id, 1000 + e.pos);
      EXPECT_EQ(r.pos_of(e.slot), e.pos);  // still stored while handed on
      evicted.push_back(e.pos);
    }
    r.commit();
    *pos += T;
  }
  return evicted;
}

TEST(KvRing, ValidatesItsSizes) {
  EXPECT_TRUE(validate(config(0, 1, 0)).ok());
  EXPECT_FALSE(validate(config(-1, 8, 0)).ok());
  EXPECT_FALSE(validate(config(4, 0, 0)).ok());
  EXPECT_FALSE(validate(config(4, 8, kMaxRecall + 1)).ok());
}

TEST(KvRing, WhileTheStreamFitsCachePositionsAreLogicalPositions) {
  KvRing r(config(3, 10, 4));
  int64_t pos = 0;
  EXPECT_TRUE(stream(r, 13, 5, &pos).empty());
  std::vector<int32_t> ids = {7};
  const RingPlan& p = r.plan(pos, ids.data(), 1);
  ASSERT_EQ(p.n_keys, 13);
  for (int64_t i = 0; i < p.n_keys; ++i) EXPECT_EQ(r.pos_of(p.key_slots[size_t(i)]), i);
  EXPECT_TRUE(p.evicted.empty() == false);  // the 14th token no longer fits: it evicts position 3
  EXPECT_EQ(p.evicted[0].pos, 3);
}

TEST(KvRing, FifoEvictsEveryWindowTokenOnceInOrderAndKeepsTheLastW) {
  for (int64_t chunk : {1, 3, 8}) {
    KvRing r(config(2, 8, 0));
    int64_t pos = 0;
    const std::vector<int64_t> ev = stream(r, 101, chunk, &pos);
    std::vector<int64_t> want(101 - 2 - 8);
    std::iota(want.begin(), want.end(), 2);
    EXPECT_EQ(ev, want) << "chunk " << chunk;
    for (int64_t p = 0; p < 101; ++p) {
      const bool held = p < 2 || p >= 101 - 8;
      EXPECT_EQ(r.find(p) >= 0, held) << p;
      if (held) {
        EXPECT_EQ(r.pos_of(r.find(p)), p);
      }
    }
  }
}

TEST(KvRing, AttendsAnchorsThenRecallThenTheWindowOldestFirst) {
  KvRing r(config(2, 4, 3));
  int64_t pos = 0;
  stream(r, 9, 1, &pos);  // anchors 0 1, window 5 6 7 8
  const std::vector<int64_t> rp = {100, 101};
  const std::vector<int32_t> rid = {5, 6};
  ASSERT_TRUE(r.set_recall(rp, rid).ok());
  std::vector<int32_t> ids = {0};
  const RingPlan& p = r.plan(pos, ids.data(), 1);
  std::vector<int64_t> order;
  for (int32_t s : p.key_slots) order.push_back(r.pos_of(s));
  EXPECT_EQ(order, (std::vector<int64_t>{0, 1, 100, 101, 5, 6, 7, 8}));
  EXPECT_EQ(p.key_slots[2], 2 + 4);  // recall slots follow the window's
  EXPECT_EQ(r.id_of(p.key_slots[3]), 6);
  r.commit();
  const std::vector<int64_t> too_many(4, 0);
  const std::vector<int32_t> too_many_ids(4, 0);
  EXPECT_FALSE(r.set_recall(too_many, too_many_ids).ok());
  r.reset();
  EXPECT_EQ(r.n_recall() + r.n_window() + r.n_anchors(), 0);
}

TEST(KvRing, MassEvictsTheLeastAttendedUnprotectedToken) {
  KvRing r(config(1, 6, 0, EvictPolicy::kMass, 2));
  EXPECT_EQ(r.max_chunk(), 4);
  int64_t pos = 0;
  stream(r, 6, 1, &pos);  // anchor 0, window 1..5 (one slot free)
  std::vector<int32_t> ids = {0};
  const RingPlan& p = r.plan(pos, ids.data(), 1);
  EXPECT_TRUE(p.evicted.empty());
  // Mass per attended key (anchor, then window 1..5).
  const std::vector<float> mass = {9, 5, 3, 7, 1, 0};
  r.add_mass(mass.data());
  r.commit();
  // Window 1..6 full: of the unprotected 1..4, position 4 has the least mass; 5 has less but is
  // among the 2 newest.
  const RingPlan& q = r.plan(pos + 1, ids.data(), 1);
  ASSERT_EQ(q.evicted.size(), 1u);
  EXPECT_EQ(q.evicted[0].pos, 4);
  r.commit();
  // The window stays in position order with the gap closed; 5 is now unprotected and goes next.
  const RingPlan& u = r.plan(pos + 2, ids.data(), 1);
  std::vector<int64_t> order;
  for (int32_t s : u.key_slots) order.push_back(r.pos_of(s));
  EXPECT_EQ(order, (std::vector<int64_t>{0, 1, 2, 3, 5, 6, 7}));
  ASSERT_EQ(u.evicted.size(), 1u);
  EXPECT_EQ(u.evicted[0].pos, 5);
}

TEST(KvRing, RecallSlotsKeepTheMassTheirCurrentRowsReceived) {
  KvRing r(config(1, 4, 2, EvictPolicy::kMass, 1));
  int64_t pos = 0;
  stream(r, 3, 1, &pos);  // anchor 0, window 1 2
  const std::vector<int64_t> rp = {100, 101};
  const std::vector<int32_t> rid = {5, 6};
  ASSERT_TRUE(r.set_recall(rp, rid).ok());
  std::vector<int32_t> ids = {0};
  for (int step = 0; step < 2; ++step) {
    const RingPlan& p = r.plan(pos++, ids.data(), 1);
    ASSERT_EQ(p.n_keys, 5 + step);  // anchor, 2 recalled, the window's 2 + step
    std::vector<float> mass(size_t(p.n_keys), 0.0f);
    mass[1] = 0.25f;  // anchor, then the recall slots
    mass[2] = 0.5f;
    r.add_mass(mass.data());
    r.commit();
  }
  EXPECT_EQ(r.mass_of(1 + 4), 0.5f);
  EXPECT_EQ(r.mass_of(1 + 4 + 1), 1.0f);
  ASSERT_TRUE(r.set_recall(rp, rid).ok());  // new rows (the same ids or not): mass from 0
  EXPECT_EQ(r.mass_of(1 + 4), 0.0f);
  EXPECT_EQ(r.mass_of(1 + 4 + 1), 0.0f);
}

TEST(KvRing, SyntheticContextIsTheFifoStateAfterNTokens) {
  KvRing a(config(3, 16, 2)), b(config(3, 16, 2));
  int64_t pos = 0;
  stream(a, 1000, 7, &pos);
  b.synthesize_context(1000);
  for (int64_t p = 0; p < 1000; ++p) EXPECT_EQ(a.find(p) >= 0, b.find(p) >= 0) << p;
  EXPECT_EQ(a.n_window(), b.n_window());
}

}  // namespace
}  // namespace infer
