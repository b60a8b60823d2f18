// Quiescence on the Vulkan path (gpu/gpu_forward_quiescence.cpp, docs/QUIESCENCE.md) against the
// CPU's: over a long teacher-forced stream on dense-mini, where it does skip, the GPU skips the
// same tokens and its logits stay within the golden bound of the CPU's, exact positions and KV
// ring alike; at threshold 0 (never skips) the split decode gives the unsplit GPU's logits bit for
// bit, and its greedy ids too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "gpu/gpu_forward.h"
#include "model/cpu_forward.h"
#include "model/model.h"
#include "model/quiescence.h"
#include "model/thread_pool.h"
#include "test/gpu/gpu_test_env.h"
#include "test/model/golden_fixture.h"
#include "test/model/ring_test_util.h"
#include "test/test_paths.h"

namespace infer::gpu {
namespace {

constexpr float kTol = test::kGoldenTol;  // as the other GPU forward tests
constexpr int64_t kSteps = 240;           // decode tokens per stream
constexpr int64_t kChunk = 7;             // prefill in ragged chunks (16 = 7 + 7 + 2)

// The bench's prompt (cli/bench_quiescence.cpp): <bos> and 15 pseudo-random ids, after which
// dense-mini's greedy stream settles into the loops where it goes quiet.
std::vector<int32_t> prompt(int64_t vocab) {
  std::vector<int32_t> ids(16);
  uint32_t s = 12345;
  ids[0] = 2;
  for (size_t i = 1; i < ids.size(); ++i) {
    s = s * 1664525u + 1013904223u;
    ids[i] = int32_t(3 + (s >> 8) % uint32_t(vocab - 3));
  }
  return ids;
}

class QuiescenceGpu : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (HasFatalFailure()) return;
    auto m = Model::load(test::repo_fixtures() / "gemma4-text" / "dense-mini",
                         LoadOptions{Quant::kAsStored, EmbedScale::kF32}, pool_);
    ASSERT_TRUE(m.ok()) << m.error().message;
    model_ = std::move(m).value();
    V_ = model_->config().text.vocab_size;
  }

  std::unique_ptr<GpuForward> gpu(VulkanContext& ctx, const RingConfig* ring) {
    auto f = ring ? GpuForward::create(ctx, *model_, pool_, *ring, kChunk)
                  : GpuForward::create(ctx, *model_, pool_, kMaxPositions, kChunk);
    EXPECT_TRUE(f.ok()) << f.error().message;
    return f.ok() ? std::move(f).value() : nullptr;
  }
  std::unique_ptr<CpuForward> cpu(const RingConfig* ring) {
    return ring ? std::make_unique<CpuForward>(*model_, pool_, *ring, kChunk)
                : std::make_unique<CpuForward>(*model_, pool_, kMaxPositions, kChunk);
  }

  // CPU and GPU quiescence at `threshold`, teacher-forced on the CPU's greedy tokens: per token
  // the same skip decision and logits within kTol. Returns the tokens the CPU skipped.
  int64_t same_as_cpu(VulkanContext& ctx, const RingConfig* ring, float threshold) {
    auto g = gpu(ctx, ring);
    auto c = cpu(ring);
    if (g == nullptr) return -1;
    QuiescenceConfig qc;
    qc.threshold = threshold;
    c->set_quiescence(&qc);
    EXPECT_TRUE(g->set_quiescence(&qc).ok());
    std::vector<float> lc(static_cast<size_t>(V_)), lg(static_cast<size_t>(V_));
    const std::vector<int32_t> ids = prompt(V_);
    EXPECT_TRUE(c->prefill(ids, lc.data()).ok());
    EXPECT_TRUE(g->prefill(ids, lg.data()).ok());
    EXPECT_LT(test::max_abs_diff(lc.data(), lg.data(), V_), kTol);
    float worst = 0;
    int64_t decided_apart = 0;
    for (int64_t t = 0; t < kSteps; ++t) {
      const int32_t id = test::argmax(lc.data(), V_);
      EXPECT_TRUE(c->decode(id, lc.data()).ok());
      EXPECT_TRUE(g->decode(id, lg.data()).ok());
      decided_apart +=
          c->quiescence_stats()->last_skipped != g->quiescence_stats()->last_skipped;
      worst = std::max(worst, test::max_abs_diff(lc.data(), lg.data(), V_));
    }
    EXPECT_EQ(decided_apart, 0);
    EXPECT_LT(worst, kTol);
    const QuiescenceStats& sc = *c->quiescence_stats();
    const QuiescenceStats& sg = *g->quiescence_stats();
    EXPECT_EQ(sg.tokens, kSteps);
    EXPECT_EQ(sg.tokens, sc.tokens);
    EXPECT_EQ(sg.skipped_tokens, sc.skipped_tokens);
    EXPECT_EQ(sg.skipped_layers, sc.skipped_layers);
    return sc.skipped_tokens;
  }

  // GPU at threshold 0 against the GPU without quiescence: logits (decode) and ids
  // (decode_greedy) identical, nothing skipped.
  void threshold_zero_is_unsplit(VulkanContext& ctx, const RingConfig* ring) {
    auto plain = gpu(ctx, ring);
    auto quiet = gpu(ctx, ring);
    if (plain == nullptr || quiet == nullptr) return;
    QuiescenceConfig qc;
    qc.threshold = 0;
    ASSERT_TRUE(quiet->set_quiescence(&qc).ok());
    const std::vector<int32_t> ids = prompt(V_);
    std::vector<float> lp(ids.size() * size_t(V_)), lq(lp.size());
    ASSERT_TRUE(plain->prefill(ids, lp.data(), true).ok());
    ASSERT_TRUE(quiet->prefill(ids, lq.data(), true).ok());
    ASSERT_EQ(std::memcmp(lp.data(), lq.data(), lp.size() * sizeof(float)), 0);
    for (int64_t t = 0; t < 40; ++t) {
      const int32_t id = test::argmax(lp.data(), V_);
      ASSERT_TRUE(plain->decode(id, lp.data()).ok());
      ASSERT_TRUE(quiet->decode(id, lq.data()).ok());
      ASSERT_EQ(std::memcmp(lp.data(), lq.data(), size_t(V_) * sizeof(float)), 0) << t;
    }
    for (int64_t t = 0; t < 20; ++t) {
      const int32_t id = test::argmax(lp.data(), V_);
      auto a = plain->decode_greedy(id);
      auto b = quiet->decode_greedy(id);
      ASSERT_TRUE(a.ok() && b.ok());
      ASSERT_EQ(*a, *b) << t;
      ASSERT_TRUE(plain->decode(*a, lp.data()).ok());
      ASSERT_TRUE(quiet->decode(*b, lq.data()).ok());
    }
    EXPECT_EQ(quiet->quiescence_stats()->tokens, 80);
    EXPECT_EQ(quiet->quiescence_stats()->skipped_tokens, 0);
  }

  static constexpr int64_t kMaxPositions = 16 + kSteps + 8;
  ThreadPool pool_{2};
  std::unique_ptr<Model> model_;
  int64_t V_ = 0;
};

// dense-mini skips ~30% of its layers at 1e-2 on the CPU (docs/QUIESCENCE.md); the GPU must make
// every one of those decisions too (a stream where little skips would prove little: 140 of 240
// tokens skip here).
TEST_F(QuiescenceGpu, SkipsTheCpusTokensWithTheCpusLogits) {
  EXPECT_GE(same_as_cpu(*ctx_, nullptr, 1e-2f), kSteps / 4);
}

// The KV ring (window 60 < the stream): skipped tokens' rows go through the staging slots and
// the commit like any other; on the staged (non-UMA) context.
TEST_F(QuiescenceGpu, RingSkipsTheCpusTokensWithTheCpusLogits) {
  const RingConfig r = test::ring(4, 60, 0);
  EXPECT_GE(same_as_cpu(*staging_ctx_, &r, 1e-2f), kSteps / 4);
}

TEST_F(QuiescenceGpu, ThresholdZeroIsTheUnsplitGpu) { threshold_zero_is_unsplit(*ctx_, nullptr); }

TEST_F(QuiescenceGpu, RingThresholdZeroIsTheUnsplitGpu) {
  const RingConfig r = test::ring(4, 60, 0);
  threshold_zero_is_unsplit(*ctx_, &r);
}

// Off again: decode is the unsplit recording (stats gone), and the prefill recordings made
// while on (with probe copies) are dropped.
TEST_F(QuiescenceGpu, TurnsOff) {
  auto g = gpu(*ctx_, nullptr);
  ASSERT_NE(g, nullptr);
  QuiescenceConfig qc;
  ASSERT_TRUE(g->set_quiescence(&qc).ok());
  ASSERT_NE(g->quiescence_stats(), nullptr);
  std::vector<float> logits(static_cast<size_t>(V_));
  ASSERT_TRUE(g->prefill(prompt(V_), logits.data()).ok());
  ASSERT_TRUE(g->set_quiescence(nullptr).ok());
  EXPECT_EQ(g->quiescence_stats(), nullptr);
  g->reset();
  ASSERT_TRUE(g->prefill(prompt(V_), logits.data()).ok());
  ASSERT_TRUE(g->decode(7, logits.data()).ok());
}

}  // namespace
}  // namespace infer::gpu
