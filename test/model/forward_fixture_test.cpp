// The CPU forward pass against the golden fixtures (GEMMA4_TEXT.md §9): every prompt logit, the 16
// greedy tokens and their decode-step logits within 2e-3, and chunked prefill equal to one chunk.
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <vector>

#include "model/cpu_forward.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "test/model/golden_fixture.h"
#include "test/test_paths.h"

namespace infer {
namespace {

constexpr float kTol = test::kGoldenTol;
constexpr int64_t kMaxPositions = test::kGoldenMaxPositions;
// The oracle ran in fp32, so the embedding scales are fp32(√H), fp32(√P) (§4.2).
const LoadOptions kOracleLoad{Quant::kAsStored, EmbedScale::kF32};

using Case = test::FixtureCase;

class ForwardFixture : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    dir_ = test::repo_fixtures() / "gemma4-text" / GetParam().dir;
    golden_ = test::read_fixture_golden(dir_);
    auto m = Model::load(dir_, kOracleLoad, pool_);
    ASSERT_TRUE(m.ok()) << m.error().message;
    model_ = std::move(m).value();
    ASSERT_EQ(golden_.vocab, model_->config().text.vocab_size);
    ASSERT_FALSE(golden_.prompt_ids.empty());
  }

  // Prompt logits [T, V] of one prefill split into chunks of `chunk` tokens.
  std::vector<float> prompt_logits(int64_t chunk) {
    CpuForward fwd(*model_, pool_, kMaxPositions, chunk);
    std::vector<float> logits(golden_.prompt_ids.size() * size_t(golden_.vocab));
    auto r = fwd.prefill(golden_.prompt_ids, logits.data(), true);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return logits;
  }

  // Per-layer max |diff| of the last prompt row against hidden_checksums: names the first layer
  // that diverges when the logits do not match.
  std::string layer_diagnostic() {
    struct Capture {
      const test::FixtureGolden* g;
      int64_t H;
      std::ostringstream out;
      int first_bad = -2;
    } cap{&golden_, model_->config().text.hidden_size, {}, -2};
    CpuForward fwd(*model_, pool_, kMaxPositions, kMaxPositions);
    fwd.set_layer_hook(
        [](void* ctx, int layer, int64_t pos0, int64_t T, const float* x) {
          auto& c = *static_cast<Capture*>(ctx);
          const int64_t row = c.g->checksum_position - pos0;
          if (row < 0 || row >= T) return;
          const std::vector<float>& want =
              layer < 0 ? c.g->embeddings : c.g->layer_values[size_t(layer)];
          const float d = test::max_abs_diff(x + row * c.H, want.data(), c.H);
          c.out << (layer < 0 ? std::string("embeddings") : "layer " + std::to_string(layer))
                << ": max|diff| " << d << "\n";
          if (d > 1e-3f && c.first_bad == -2) c.first_bad = layer;
        },
        &cap);
    std::vector<float> logits(static_cast<size_t>(golden_.vocab));
    (void)fwd.prefill(golden_.prompt_ids, logits.data(), false);
    std::string where = cap.first_bad == -2 ? "no layer differs by > 1e-3"
                        : cap.first_bad == -1
                            ? "first divergence: embeddings"
                            : "first divergence: layer " + std::to_string(cap.first_bad);
    return where + "\n" + cap.out.str();
  }

  ThreadPool pool_{2};
  std::filesystem::path dir_;
  test::FixtureGolden golden_;
  std::unique_ptr<Model> model_;
};

TEST_P(ForwardFixture, PromptLogitsMatchGolden) {
  const std::vector<float> logits = prompt_logits(kMaxPositions);
  ASSERT_EQ(logits.size(), golden_.prompt_logits.size());
  const float d =
      test::max_abs_diff(logits.data(), golden_.prompt_logits.data(), int64_t(logits.size()));
  std::printf("[%s] prompt logits max|diff| %.3e\n", GetParam().name, double(d));
  RecordProperty("prompt_max_abs_diff", std::to_string(d));
  EXPECT_LE(d, kTol) << layer_diagnostic();
}

TEST_P(ForwardFixture, GreedyDecodeMatchesGoldenTokensAndLogits) {
  const int64_t V = golden_.vocab;
  CpuForward fwd(*model_, pool_, kMaxPositions, 64);
  std::vector<float> logits(static_cast<size_t>(V));
  ASSERT_TRUE(fwd.prefill(golden_.prompt_ids, logits.data()).ok());
  std::vector<int32_t> tokens;
  float worst = 0.0f;
  for (size_t k = 0; k < golden_.greedy_tokens.size(); ++k) {
    worst = std::max(worst, test::max_abs_diff(logits.data(), &golden_.greedy_logits[k * V], V));
    tokens.push_back(test::argmax(logits.data(), V));
    if (k + 1 < golden_.greedy_tokens.size()) {
      ASSERT_TRUE(fwd.decode(tokens.back(), logits.data()).ok());
    }
  }
  std::printf("[%s] decode-step logits max|diff| %.3e\n", GetParam().name, double(worst));
  EXPECT_EQ(tokens, golden_.greedy_tokens);
  EXPECT_LE(worst, kTol);
  EXPECT_EQ(fwd.position(), int64_t(golden_.prompt_ids.size() + golden_.greedy_tokens.size() - 1));
}

TEST_P(ForwardFixture, ChunkedPrefillGivesTheSameLogits) {
  const std::vector<float> whole = prompt_logits(kMaxPositions);
  for (int64_t chunk : {1, 5, 7}) {
    const std::vector<float> split = prompt_logits(chunk);
    // Not bit-equal: matmul may sum a single row in another order than a batch (~1e-4 seen).
    const float d = test::max_abs_diff(whole.data(), split.data(), int64_t(whole.size()));
    EXPECT_LE(d, 1e-3f) << "chunk " << chunk;
    EXPECT_LE(test::max_abs_diff(split.data(), golden_.prompt_logits.data(), int64_t(split.size())),
              kTol)
        << "chunk " << chunk;
  }
}

TEST_P(ForwardFixture, ResetStartsTheStreamAgain) {
  const int64_t V = golden_.vocab;
  CpuForward fwd(*model_, pool_, kMaxPositions, 16);
  std::vector<float> first(static_cast<size_t>(V)), second(static_cast<size_t>(V));
  ASSERT_TRUE(fwd.prefill(golden_.prompt_ids, first.data()).ok());
  fwd.reset();
  EXPECT_EQ(fwd.position(), 0);
  ASSERT_TRUE(fwd.prefill(golden_.prompt_ids, second.data()).ok());
  EXPECT_EQ(first, second);
}

TEST_P(ForwardFixture, RejectsStreamsPastMaxPositionsAndBadIds) {
  const int64_t n = int64_t(golden_.prompt_ids.size());
  CpuForward fwd(*model_, pool_, n - 1, 8);
  std::vector<float> logits(static_cast<size_t>(golden_.vocab));
  EXPECT_FALSE(fwd.prefill(golden_.prompt_ids, logits.data()).ok());
  EXPECT_FALSE(fwd.decode(int32_t(golden_.vocab), logits.data()).ok());
  EXPECT_FALSE(fwd.decode(-1, logits.data()).ok());
  EXPECT_EQ(fwd.position(), 0);
}

INSTANTIATE_TEST_SUITE_P(ForwardFixtures, ForwardFixture,
                         ::testing::ValuesIn(test::kFixtureCases),
                         test::ParamName());

}  // namespace
}  // namespace infer
