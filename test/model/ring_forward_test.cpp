// The CPU forward pass in KV-ring mode (model/kv_ring.h, DESIGN.md §4): equal to the golden
// fixtures while the stream fits in anchors + window, a different (finite) model past that,
// every evicted token handed to the sink once, mass eviction keeping what is attended, and
// recalled rows attended as the context they came from.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/cpu_forward.h"
#include "model/kv_ring_api.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "test/model/golden_fixture.h"
#include "test/model/ring_test_util.h"
#include "test/test_paths.h"

namespace infer {
namespace {

const LoadOptions kOracleLoad{Quant::kAsStored, EmbedScale::kF32};

struct Loaded {
  test::FixtureGolden golden;
  std::unique_ptr<Model> model;
};

Loaded load(const char* dir_name, ThreadPool& pool) {
  const auto dir = test::repo_fixtures() / "gemma4-text" / dir_name;
  Loaded l{test::read_fixture_golden(dir), nullptr};
  auto m = Model::load(dir, kOracleLoad, pool);
  EXPECT_TRUE(m.ok()) << m.error().message;
  if (m.ok()) l.model = std::move(m).value();
  return l;
}

using test::pseudo_ids;
using test::ring;


// KL(p || q) of two logit rows, in nats.
double kl(const float* p_logits, const float* q_logits, int64_t V) {
  auto log_softmax = [V](const float* x, std::vector<double>& out) {
    const double mx = *std::max_element(x, x + V);
    double s = 0;
    for (int64_t i = 0; i < V; ++i) s += std::exp(double(x[i]) - mx);
    out.resize(size_t(V));
    for (int64_t i = 0; i < V; ++i) out[size_t(i)] = double(x[i]) - mx - std::log(s);
  };
  std::vector<double> lp, lq;
  log_softmax(p_logits, lp);
  log_softmax(q_logits, lq);
  double d = 0;
  for (int64_t i = 0; i < V; ++i) d += std::exp(lp[size_t(i)]) * (lp[size_t(i)] - lq[size_t(i)]);
  return d;
}

class RingFixture : public ::testing::TestWithParam<test::FixtureCase> {};

// A + W = 4 + 252 holds e2b-long's 216 positions: the ring must be the exact model, prefilled in
// any chunking and decoded greedily.
TEST_P(RingFixture, EqualsTheGoldenModelWhileTheStreamFits) {
  ThreadPool pool(2);
  Loaded l = load(GetParam().dir, pool);
  ASSERT_NE(l.model, nullptr);
  const int64_t V = l.golden.vocab, n = int64_t(l.golden.prompt_ids.size());
  for (int64_t chunk : {256, 7}) {
    CpuForward fwd(*l.model, pool, ring(4, 252, 16), chunk);
    std::vector<float> logits(static_cast<size_t>(n * V));
    ASSERT_TRUE(fwd.prefill(l.golden.prompt_ids, logits.data(), true).ok());
    EXPECT_LE(test::max_abs_diff(logits.data(), l.golden.prompt_logits.data(), n * V),
              test::kGoldenTol)
        << "chunk " << chunk;
  }
  CpuForward fwd(*l.model, pool, ring(4, 252, 16), 64);
  std::vector<float> logits(static_cast<size_t>(V));
  ASSERT_TRUE(fwd.prefill(l.golden.prompt_ids, logits.data()).ok());
  std::vector<int32_t> tokens;
  float worst = 0.0f;
  for (size_t k = 0; k < l.golden.greedy_tokens.size(); ++k) {
    worst = std::max(worst, test::max_abs_diff(logits.data(), &l.golden.greedy_logits[k * V], V));
    tokens.push_back(test::argmax(logits.data(), V));
    if (k + 1 < l.golden.greedy_tokens.size()) {
      ASSERT_TRUE(fwd.decode(tokens.back(), logits.data()).ok());
    }
  }
  EXPECT_EQ(tokens, l.golden.greedy_tokens);
  EXPECT_LE(worst, test::kGoldenTol);
  EXPECT_EQ(fwd.ring().n_anchors(), 4);
  EXPECT_EQ(fwd.ring().n_window(), fwd.position() - 4);  // nothing evicted yet
}

INSTANTIATE_TEST_SUITE_P(RingFixtures, RingFixture, ::testing::ValuesIn(test::kFixtureCases),
                         test::ParamName());

// Past A + W the ring drops tokens: the logits of positions that fit still match the golden ones,
// later ones differ (the model no longer sees the dropped tokens) but stay finite.
TEST(RingForward, PastTheWindowTheRingIsWhatTheModelSees) {
  ThreadPool pool(2);
  Loaded l = load("e2b-long", pool);
  ASSERT_NE(l.model, nullptr);
  const int64_t V = l.golden.vocab, n = int64_t(l.golden.prompt_ids.size());
  const int64_t A = 4, W = 32;
  CpuForward fwd(*l.model, pool, ring(A, W, 8), 16);
  std::vector<float> logits(static_cast<size_t>(n * V));
  ASSERT_TRUE(fwd.prefill(l.golden.prompt_ids, logits.data(), true).ok());
  // Chunks of 16 see the ring as at their start: position p attends everything while the ring
  // held every earlier position at its chunk's start, i.e. for p < A + W + 16 rounded to chunks.
  const int64_t exact = (A + W) / 16 * 16 + 16;
  EXPECT_LE(test::max_abs_diff(logits.data(), l.golden.prompt_logits.data(), exact * V),
            test::kGoldenTol);
  const float* last = logits.data() + (n - 1) * V;
  EXPECT_GT(test::max_abs_diff(last, &l.golden.prompt_logits[size_t((n - 1) * V)], V), 1e-2f);
  for (int64_t i = 0; i < n * V; ++i) ASSERT_TRUE(std::isfinite(logits[size_t(i)])) << i;
  EXPECT_EQ(fwd.ring().n_window(), W);
  EXPECT_EQ(fwd.ring().n_anchors(), A);
}

// Collects what the ring hands on: positions, ids and the rows of every tiered layer.
struct Collector final : EvictionSink {
  void on_evict(std::span<const EvictedToken> tokens, const KvRows& rows) override {
    block.append(tokens, rows);
  }
  KvBlock block;
};

TEST(RingForward, FifoHandsEveryEvictedTokenOnceWithTheRowsItWasStoredWith) {
  ThreadPool pool(2);
  Loaded l = load("e2b-mini", pool);
  ASSERT_NE(l.model, nullptr);
  const int64_t V = l.golden.vocab, A = 3, W = 20, n = 300;
  const std::vector<int32_t> ids = pseudo_ids(n, V, 7);
  CpuForward fwd(*l.model, pool, ring(A, W, 4), 8);
  Collector sink;
  fwd.set_eviction_sink(&sink);
  // Decode one by one and keep every token's rows as read right after it was stored.
  KvBlock stored;
  std::vector<float> logits(static_cast<size_t>(V));
  for (int64_t p = 0; p < 100; ++p) {
    ASSERT_TRUE(fwd.decode(ids[size_t(p)], logits.data()).ok());
    KvBlock one;
    ASSERT_TRUE(fwd.read_kv(p, 1, &one).ok()) << p;
    if (stored.layers.empty()) stored = one;
    else {
      stored.pos.push_back(one.pos[0]);
      stored.ids.push_back(one.ids[0]);
      for (size_t i = 0; i < one.layers.size(); ++i) {
        stored.k[i].insert(stored.k[i].end(), one.k[i].begin(), one.k[i].end());
        stored.v[i].insert(stored.v[i].end(), one.v[i].begin(), one.v[i].end());
      }
    }
  }
  // The rest in prefill chunks (up to 8 evictions at a time).
  ASSERT_TRUE(fwd.prefill(std::span(ids).subspan(100), logits.data()).ok());

  std::vector<int64_t> want;
  for (int64_t p = A; p < n - W; ++p) want.push_back(p);
  EXPECT_EQ(sink.block.pos, want);
  ASSERT_EQ(sink.block.ids.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(sink.block.ids[i], ids[size_t(want[i])]);
  ASSERT_FALSE(sink.block.layers.empty());
  ASSERT_EQ(sink.block.layers, stored.layers);
  // Rows of positions A .. 99 as stored when they were decoded.
  for (size_t li = 0; li < stored.layers.size(); ++li) {
    const size_t row = stored.k[li].size() / stored.size();
    const size_t n_cmp = size_t(100 - A);
    EXPECT_TRUE(std::equal(sink.block.k[li].begin(), sink.block.k[li].begin() + n_cmp * row,
                           stored.k[li].begin() + A * row));
    EXPECT_TRUE(std::equal(sink.block.v[li].begin(), sink.block.v[li].begin() + n_cmp * row,
                           stored.v[li].begin() + A * row));
  }
  EXPECT_FALSE(fwd.read_kv(A, 1, &stored).ok());  // evicted: no longer readable
}

// H2O: the window keeps the most attended tokens. Every evicted token is handed on once, none of
// the protected newest ones, and the choice is not FIFO's.
TEST(RingForward, MassEvictionKeepsAttendedTokensAndHandsOnEachOnce) {
  ThreadPool pool(2);
  Loaded l = load("e2b-mini", pool);
  ASSERT_NE(l.model, nullptr);
  const int64_t V = l.golden.vocab, A = 2, W = 24, n = 400;
  const std::vector<int32_t> ids = pseudo_ids(n, V, 11);
  CpuForward fwd(*l.model, pool, ring(A, W, 0, EvictPolicy::kMass), 4);
  const int64_t protect = fwd.ring().protect_recent();
  ASSERT_GT(protect, 0);
  struct Check final : EvictionSink {
    void on_evict(std::span<const EvictedToken> tokens, const KvRows&) override {
      for (const EvictedToken& t : tokens) {
        EXPECT_LT(t.pos, fwd->position() - protect) << "a protected token was evicted";
        pos.push_back(t.pos);
      }
    }
    const CpuForward* fwd;
    int64_t protect;
    std::vector<int64_t> pos;
  } sink;
  sink.fwd = &fwd;
  sink.protect = protect;
  fwd.set_eviction_sink(&sink);
  std::vector<float> logits(static_cast<size_t>(V));
  ASSERT_TRUE(fwd.prefill(ids, logits.data()).ok());

  std::vector<int64_t> sorted = sink.pos;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "evicted twice";
  EXPECT_EQ(int64_t(sink.pos.size()), n - A - W);
  // What stays is what was not evicted: together they are every window position once.
  const KvRing& r = fwd.ring();
  std::vector<int64_t> all = sorted;
  for (int64_t p = A; p < n; ++p) {
    if (r.find(p) >= 0) all.push_back(p);
  }
  std::sort(all.begin(), all.end());
  std::vector<int64_t> want;
  for (int64_t p = A; p < n; ++p) want.push_back(p);
  EXPECT_EQ(all, want);
  // Not FIFO: some token older than the window's FIFO span survived.
  int64_t old_kept = 0;
  for (int64_t p = A; p < n - W; ++p) old_kept += r.find(p) >= 0;
  EXPECT_GT(old_kept, 0);
}

// Recall rows of a text X (read from the window), then a reset, then X's rows put back in the
// recall tier at the cache positions X had (A = 0), then a text Y. Returns Y's logits [ny, V]
// and, in *exact, those of the exact model on X ++ Y.
struct RecallRun {
  std::vector<float> exact, with_x, with_z, without;
};
RecallRun recall_run(const Model& model, ThreadPool& pool, int64_t nx, int64_t ny) {
  const int64_t V = model.config().text.vocab_size;
  const std::vector<int32_t> x = pseudo_ids(nx, V, 3), z = pseudo_ids(nx, V, 5),
                             y = pseudo_ids(ny, V, 9);
  CpuForward fwd(model, pool, ring(0, 64, nx), 64);
  RecallRun r;
  std::vector<int32_t> xy = x;
  xy.insert(xy.end(), y.begin(), y.end());
  std::vector<float> all(size_t((nx + ny) * V));
  EXPECT_TRUE(fwd.prefill(xy, all.data(), true).ok());
  r.exact.assign(all.begin() + nx * V, all.end());
  auto rows_of = [&](const std::vector<int32_t>& text) {
    fwd.reset();
    EXPECT_TRUE(fwd.prefill(text, all.data()).ok());
    KvBlock b;
    EXPECT_TRUE(fwd.read_kv(0, nx, &b).ok());
    EXPECT_EQ(b.size(), size_t(nx));
    return b;
  };
  auto y_logits = [&](const KvBlock* recalled) {
    fwd.reset();
    if (recalled != nullptr) {
      EXPECT_TRUE(fwd.set_recall(*recalled).ok());
    }
    std::vector<float> logits(size_t(ny * V));
    EXPECT_TRUE(fwd.prefill(y, logits.data(), true).ok());
    return logits;
  };
  const KvBlock rx = rows_of(x), rz = rows_of(z);
  r.with_x = y_logits(&rx);
  r.with_z = y_logits(&rz);
  r.without = y_logits(nullptr);
  KvBlock bad = rx;  // a block of the wrong shape is refused
  bad.k[0].pop_back();
  EXPECT_FALSE(fwd.set_recall(bad).ok());
  return r;
}

// Every layer full attention (e2b-mini's shapes, random weights, KV sharing kept): every layer
// reads the tiers, so recalled rows are the context they came from, exactly.
TEST(RingForward, RecalledRowsOfAnAllFullAttentionModelEqualTheirContext) {
  ThreadPool pool(2);
  const auto dir = test::repo_fixtures() / "gemma4-text" / "e2b-mini";
  nlohmann::json cfg = nlohmann::json::parse(test::read_file(dir / "config.json"));
  nlohmann::json& tc = cfg["text_config"];
  const int L = tc["num_hidden_layers"].get<int>();
  tc["layer_types"] = std::vector<std::string>(size_t(L), "full_attention");
  tc["per_layer_config"] = nlohmann::json::object();
  for (int i = 0; i < L; ++i) tc["per_layer_config"][std::to_string(i)] = {{"head_dim", 32}};
  auto m = Model::random(cfg.dump(), 17, DType::kF32, kOracleLoad, pool);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const int64_t V = (*m)->config().text.vocab_size, ny = 12;
  const RecallRun r = recall_run(**m, pool, 20, ny);
  const float d_x = test::max_abs_diff(r.with_x.data(), r.exact.data(), ny * V);
  const float d_z = test::max_abs_diff(r.with_z.data(), r.exact.data(), ny * V);
  std::printf("Y's logits vs the exact model on X ++ Y: recall X %.3g, recall Z %.3g\n",
              double(d_x), double(d_z));
  EXPECT_LE(d_x, 1e-4f);
  EXPECT_GT(d_z, 1e-2f);
}

// With sliding layers only the full layers read recalled rows, and the sliding ones miss X's
// tail, so the model is not X ++ Y exactly; it must still come closer to it (mean KL of the
// next-token distributions over Y) with X's rows than with Z's at the same positions or none.
TEST(RingForward, RecalledRowsBringTheModelCloserToTheirContext) {
  ThreadPool pool(2);
  Loaded l = load("e2b-mini", pool);
  ASSERT_NE(l.model, nullptr);
  const int64_t V = l.golden.vocab, ny = 48, sw = 8;
  const RecallRun r = recall_run(*l.model, pool, 24, ny);
  // From token sw on, the sliding layers see only Y in both runs.
  auto mean_kl = [&](const std::vector<float>& logits) {
    double s = 0;
    for (int64_t t = sw; t < ny; ++t) s += kl(&r.exact[size_t(t * V)], &logits[size_t(t * V)], V);
    return s / double(ny - sw);
  };
  const double kl_x = mean_kl(r.with_x), kl_z = mean_kl(r.with_z), kl_none = mean_kl(r.without);
  std::printf("mean KL to X ++ Y over Y[%lld:]: recall X %.3g, recall Z %.3g, none %.3g\n",
              (long long)sw, kl_x, kl_z, kl_none);
  EXPECT_LT(kl_x, 0.75 * kl_z);
  EXPECT_LT(kl_x, 0.75 * kl_none);
}

}  // namespace
}  // namespace infer
