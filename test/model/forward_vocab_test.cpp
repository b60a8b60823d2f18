// e2b-vocab (GEMMA4_TEXT.md §9): the full 262,144-token vocabulary. Text prompts go through the
// tokenizer; their last prompt logits, 16 greedy tokens and per-step top-5 logits match golden.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "model/cpu_forward.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "model/tokenizer/tokenizer.h"
#include "test/model/golden_fixture.h"
#include "test/test_paths.h"

namespace infer {
namespace {

constexpr float kTol = 2e-3f;  // the fixtures' bound for an fp32 engine
// The oracle ran in fp32: embedding scales fp32(√32), fp32(√8), which bf16 would round (§4.2).
const LoadOptions kOracleLoad{Quant::kAsStored, EmbedScale::kF32};

class ForwardVocab : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::shared_fixtures() / "gemma4-text" / "e2b-vocab";
    golden_ = test::read_vocab_golden(dir_);
    auto m = Model::load(dir_, kOracleLoad, pool_);
    ASSERT_TRUE(m.ok()) << m.error().message;
    model_ = std::move(m).value();
    ASSERT_EQ(golden_.vocab, model_->config().text.vocab_size);
    ASSERT_EQ(golden_.prompts.size(), 3u);
  }

  ThreadPool pool_{2};
  std::filesystem::path dir_;
  test::VocabGolden golden_;
  std::unique_ptr<Model> model_;
};

TEST_F(ForwardVocab, IdsGiveGoldenLastLogitsGreedyTokensAndTop5Logits) {
  const int64_t V = golden_.vocab;
  std::vector<float> logits(static_cast<size_t>(V));
  for (size_t p = 0; p < golden_.prompts.size(); ++p) {
    const test::VocabPrompt& prompt = golden_.prompts[p];
    CpuForward fwd(*model_, pool_, 64, 8);
    ASSERT_TRUE(fwd.prefill(prompt.ids, logits.data()).ok());
    const float d_last = test::max_abs_diff(logits.data(), &golden_.last_prompt_logits[p * V], V);
    std::printf("[e2b-vocab prompt %zu] last prompt logits max|diff| %.3e\n", p, double(d_last));
    EXPECT_LE(d_last, kTol) << "prompt " << p;
    std::vector<int32_t> tokens;
    float worst = 0.0f;
    for (size_t k = 0; k < prompt.greedy_tokens.size(); ++k) {
      for (size_t j = 0; j < 5; ++j) {
        const float got = logits[size_t(prompt.top5_ids[k][j])];
        worst = std::max(worst, std::abs(got - prompt.top5_logits[k][j]));
      }
      tokens.push_back(test::argmax(logits.data(), V));
      if (k + 1 < prompt.greedy_tokens.size()) {
        ASSERT_TRUE(fwd.decode(tokens.back(), logits.data()).ok());
      }
    }
    std::printf("[e2b-vocab prompt %zu] top-5 logits max|diff| %.3e\n", p, double(worst));
    EXPECT_EQ(tokens, prompt.greedy_tokens) << "prompt " << p;
    EXPECT_LE(worst, 5e-6f + kTol) << "prompt " << p;
  }
}

TEST_F(ForwardVocab, EmbeddingScaleIsRoundedToBf16UnlessF32IsAsked) {
  EXPECT_EQ(model_->weights().embed_scale, std::sqrt(32.0f));
  EXPECT_EQ(model_->weights().ple_scale, std::sqrt(8.0f));
  auto m = Model::load(dir_, LoadOptions{}, pool_);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ((*m)->weights().embed_scale, 5.65625f);  // bf16(5.656854)
  EXPECT_EQ((*m)->weights().ple_scale, 2.828125f);   // bf16(2.828427)
}

TEST_F(ForwardVocab, TokenizerGivesGoldenIdsAndGreedyText) {
  auto tok = Tokenizer::load(dir_ / "tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  for (const test::VocabPrompt& prompt : golden_.prompts) {
    EXPECT_EQ(tok->encode(prompt.text, true), prompt.ids) << prompt.text;
    EXPECT_EQ(tok->decode(prompt.greedy_tokens), prompt.greedy_text) << prompt.text;
  }
}

}  // namespace
}  // namespace infer
