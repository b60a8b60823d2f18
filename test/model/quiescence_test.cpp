// Quiescence (model/quiescence.h, DESIGN.md §6): the velocity and EMA arithmetic, the skip rule,
// and the CPU forward with it on: threshold 0 is the exact model bit for bit, the layers below the
// skip depth never change, and a skipped token still fills the K/V rows of the skipped layers
// from its carried stream.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "model/cpu_forward.h"
#include "model/kv_ring_api.h"
#include "model/model.h"
#include "model/ops/matmul.h"
#include "model/ops/rms_norm.h"
#include "model/quiescence.h"
#include "model/thread_pool.h"
#include "test/model/golden_fixture.h"
#include "test/test_paths.h"

namespace infer {
namespace {

TEST(QuiescenceVelocity, IsOneMinusCosine) {
  const float a[3] = {1, 2, 3}, a2[3] = {2, 4, 6}, b[3] = {-1, -2, -3}, z[3] = {0, 0, 0};
  const float e0[2] = {1, 0}, e1[2] = {0, 1}, d[2] = {1, 1};
  EXPECT_EQ(stream_velocity(a, a, 3), 0.0f);  // clamped: never negative
  EXPECT_NEAR(stream_velocity(a, a2, 3), 0.0f, 1e-7);
  EXPECT_NEAR(stream_velocity(a, b, 3), 2.0f, 1e-6);
  EXPECT_NEAR(stream_velocity(e0, e1, 2), 1.0f, 1e-7);
  EXPECT_NEAR(stream_velocity(e0, d, 2), 1.0f - 1.0f / std::sqrt(2.0f), 1e-6);
  EXPECT_EQ(stream_velocity(a, z, 3), 1.0f);
}

TEST(QuiescenceEma, IsBiasCorrected) {
  Ema e;
  e.alpha = 0.25f;
  EXPECT_EQ(e.value(), 1.0f);  // nothing seen: as moving as can be
  e.add(0.2f);
  EXPECT_NEAR(e.value(), 0.2f, 1e-7);  // the first sample is the mean
  e.add(0.2f);
  EXPECT_NEAR(e.value(), 0.2f, 1e-7);
  e.add(1.0f);  // weights 0.1875·(0.2) + ... : (0.25·0.75·0.2 + 0.25·0.75²... ) by hand below
  const double w = 0.25 * 0.75 * 0.75 + 0.25 * 0.75 + 0.25;
  EXPECT_NEAR(e.value(), (0.25 * 0.75 * 0.75 * 0.2 + 0.25 * 0.75 * 0.2 + 0.25 * 1.0) / w, 1e-6);
}

TEST(QuiescencePolicy, ProbesAndSkipRule) {
  QuiescenceConfig cfg;
  cfg.threshold = 0.01f;
  cfg.max_run = 3;
  Quiescence q(cfg, 35, 4, 8);
  EXPECT_TRUE(q.is_probe(8) && q.is_probe(13) && q.is_probe(16));
  EXPECT_EQ(q.skip_depth(), 16);
  const float still[4] = {1, 2, 3, 4}, moved[4] = {4, -3, 2, 1};
  auto token = [&](const float* x, bool may_skip) {
    for (int p : {8, 13, 16}) q.observe(p, x, 1);
    return q.decide(1, may_skip);
  };
  EXPECT_FALSE(token(still, true));  // no previous token
  EXPECT_FALSE(token(still, true));  // no full token to carry from yet
  q.mark_full();
  EXPECT_FALSE(token(still, false));  // prefill rows never skip
  EXPECT_TRUE(token(still, true));
  EXPECT_TRUE(token(still, true));
  EXPECT_TRUE(token(still, true));
  EXPECT_FALSE(token(still, true));  // max_run: a full token refreshes the carry
  EXPECT_TRUE(token(still, true));
  EXPECT_FALSE(token(moved, true));  // one moving token lifts the short EMA at once
  EXPECT_GT(q.velocity_short(), cfg.threshold);
  EXPECT_FALSE(token(still, true));  // and the long one stays up for a while
  EXPECT_GT(q.velocity_long(), cfg.threshold);
  q.reset();
  EXPECT_FALSE(token(still, true));

  cfg.threshold = 0;  // strict <: threshold 0 never skips, even a perfectly still stream
  Quiescence z(cfg, 35, 4, 8);
  z.mark_full();
  for (int t = 0; t < 5; ++t) {
    for (int p : {8, 13, 16}) z.observe(p, still, 1);
    EXPECT_FALSE(z.decide(1, true));
  }
}

const LoadOptions kLoad{Quant::kAsStored, EmbedScale::kF32};

std::unique_ptr<Model> load(const char* name, ThreadPool& pool) {
  auto m = Model::load(test::repo_fixtures() / "gemma4-text" / name, kLoad, pool);
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.ok() ? std::move(m).value() : nullptr;
}

// The stream after every layer of every decode token, in order.
struct Capture {
  int layer = 0;
  int64_t H = 0;
  std::vector<float> rows;
  static void hook(void* ctx, int layer, int64_t, int64_t T, const float* x) {
    auto* c = static_cast<Capture*>(ctx);
    if (layer == c->layer) c->rows.insert(c->rows.end(), x + (T - 1) * c->H, x + T * c->H);
  }
};

class QuiescenceFixture : public ::testing::TestWithParam<test::FixtureCase> {};

// Teacher-forced over the golden prompt and greedy tokens: threshold 0 gives the exact logits
// bit for bit; a huge threshold skips most tokens, yet the stream at the skip depth (everything a
// non-skipped token's lower layers compute) stays bit-identical, and every logit stays finite.
TEST_P(QuiescenceFixture, ThresholdZeroIsExactAndLowerLayersNeverChange) {
  ThreadPool pool(2);
  auto model = load(GetParam().dir, pool);
  ASSERT_NE(model, nullptr);
  const test::FixtureGolden g =
      test::read_fixture_golden(test::repo_fixtures() / "gemma4-text" / GetParam().dir);
  const int64_t V = g.vocab, H = model->config().text.hidden_size;
  const int L = model->config().text.num_hidden_layers;
  const int depth = Quiescence(QuiescenceConfig{}, L, H, 1).skip_depth();
  for (float threshold : {0.0f, 1e9f}) {
    CpuForward exact(*model, pool, test::kGoldenMaxPositions);
    CpuForward quiet(*model, pool, test::kGoldenMaxPositions);
    QuiescenceConfig cfg;
    cfg.threshold = threshold;
    quiet.set_quiescence(&cfg);
    Capture ce{depth, H, {}}, cq{depth, H, {}};
    exact.set_layer_hook(&Capture::hook, &ce);
    quiet.set_layer_hook(&Capture::hook, &cq);
    std::vector<float> le(static_cast<size_t>(V)), lq(static_cast<size_t>(V));
    ASSERT_TRUE(exact.prefill(g.prompt_ids, le.data()).ok());
    ASSERT_TRUE(quiet.prefill(g.prompt_ids, lq.data()).ok());
    ASSERT_EQ(std::memcmp(le.data(), lq.data(), size_t(V) * 4), 0);
    for (int32_t id : g.greedy_tokens) {
      ASSERT_TRUE(exact.decode(id, le.data()).ok());
      ASSERT_TRUE(quiet.decode(id, lq.data()).ok());
      if (threshold == 0) {
        ASSERT_EQ(std::memcmp(le.data(), lq.data(), size_t(V) * 4), 0) << quiet.position();
      }
      for (float v : lq) ASSERT_TRUE(std::isfinite(v));
    }
    ASSERT_EQ(ce.rows.size(), cq.rows.size());
    EXPECT_EQ(std::memcmp(ce.rows.data(), cq.rows.data(), ce.rows.size() * 4), 0);
    const QuiescenceStats& st = *quiet.quiescence_stats();
    EXPECT_EQ(st.tokens, int64_t(g.greedy_tokens.size()));
    if (threshold == 0) {
      EXPECT_EQ(st.skipped_tokens, 0);
    } else {
      // max_run 8: every ninth decode token is full, the others skip.
      EXPECT_GE(st.skipped_tokens, st.tokens * 8 / 9);
      EXPECT_EQ(st.skipped_layers, st.skipped_tokens * (L - 1 - depth));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, QuiescenceFixture, ::testing::ValuesIn(test::kFixtureCases),
                         test::ParamName());

// dense-mini (6 layers, none KV-shared; skip depth 2): a forced skip still writes layer 5's (full
// attention, in the ring) K/V rows at the skipped position, and they are what its carried input
// x@2(now) + x@4(last full) - x@2(last full) gives: rmsnorm, k_proj/v_proj, k_norm, v_norm (ring
// keys are stored before RoPE).
TEST(QuiescenceKv, SkippedLayersStillFillTheirCache) {
  ThreadPool pool(2);
  auto model = load("dense-mini", pool);
  ASSERT_NE(model, nullptr);
  const ModelConfig& mc = model->config();
  const int64_t H = mc.text.hidden_size, V = mc.text.vocab_size;
  RingConfig ring;
  ring.anchors = 4;
  ring.window = 60;
  ring.recall = 0;
  CpuForward fwd(*model, pool, ring);
  QuiescenceConfig cfg;
  cfg.threshold = 1e9f;
  fwd.set_quiescence(&cfg);
  Capture c2{2, H, {}}, c4{4, H, {}};
  struct Both {
    Capture *a, *b;
  } both{&c2, &c4};
  fwd.set_layer_hook(
      [](void* ctx, int layer, int64_t p, int64_t T, const float* x) {
        auto* bb = static_cast<Both*>(ctx);
        Capture::hook(bb->a, layer, p, T, x);
        Capture::hook(bb->b, layer, p, T, x);
      },
      &both);
  const std::vector<int32_t> prompt = {2, 17, 99, 301, 5, 44, 250, 7};
  std::vector<float> logits(static_cast<size_t>(V));
  ASSERT_TRUE(fwd.prefill(prompt, logits.data()).ok());
  ASSERT_TRUE(fwd.decode(123, logits.data()).ok());
  ASSERT_TRUE(fwd.quiescence_stats()->last_skipped);
  ASSERT_EQ(c2.rows.size(), size_t(2 * H));  // prefill's last row, then the skipped token
  ASSERT_EQ(c4.rows.size(), size_t(H));      // the skipped token never reached layer 4
  std::vector<float> x_in(static_cast<size_t>(H)), h(static_cast<size_t>(H));
  for (size_t k = 0; k < size_t(H); ++k) {
    x_in[k] = c2.rows[size_t(H) + k] + (c4.rows[k] - c2.rows[k]);
  }
  const int layer = 5;
  const LayerPlan& plan = mc.layers[layer];
  const LayerWeights& lw = model->weights().layers[layer];
  const float eps = float(mc.text.rms_norm_eps);
  const int64_t row = plan.num_key_value_heads * plan.head_dim;
  std::vector<float> k(static_cast<size_t>(row)), v(static_cast<size_t>(row));
  rms_norm(x_in.data(), lw.input_layernorm, 1, H, eps, h.data());
  matmul(lw.k_proj, h.data(), 1, k.data(), pool);
  if (plan.k_eq_v) {
    v = k;
  } else {
    matmul(lw.v_proj, h.data(), 1, v.data(), pool);
  }
  rms_norm(k.data(), lw.k_norm, plan.num_key_value_heads, plan.head_dim, eps, k.data());
  rms_norm(v.data(), nullptr, plan.num_key_value_heads, plan.head_dim, eps, v.data());
  KvBlock b;
  ASSERT_TRUE(fwd.read_kv(int64_t(prompt.size()), 1, &b).ok());
  size_t li = 0;
  while (li < b.layers.size() && b.layers[li] != layer) ++li;
  ASSERT_LT(li, b.layers.size());
  for (int64_t j = 0; j < row; ++j) {
    EXPECT_NEAR(b.k[li][size_t(j)], k[size_t(j)], 1e-5f) << j;
    EXPECT_NEAR(b.v[li][size_t(j)], v[size_t(j)], 1e-5f) << j;
  }
  // Later tokens attend to those rows and stay finite through skips and refreshes.
  for (int t = 0; t < 20; ++t) {
    ASSERT_TRUE(fwd.decode(int32_t(10 + 7 * t), logits.data()).ok());
    for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  }
  EXPECT_GT(fwd.quiescence_stats()->skipped_tokens, 15);
}

}  // namespace
}  // namespace infer
