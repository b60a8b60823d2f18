// The GPU forward pass on e2b-vocab (the shared fixtures' model with Gemma 4's whole vocabulary)
// against its golden file and the CPU: bf16 as stored, then Q8_0 and Q4_0 against the CPU with
// the same bytes. Chunks of 8 tokens: prefill stays on the f32 products, so the fp32 bound holds.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "gpu/gpu_forward.h"
#include "model/cpu_forward.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "test/gpu/gpu_test_env.h"
#include "test/model/golden_fixture.h"
#include "test/test_paths.h"

namespace infer::gpu {
namespace {

constexpr float kTol = test::kGoldenTol;
// The oracle ran in fp32, so the embedding scales are fp32(√H), fp32(√P) (§4.2).
const LoadOptions kOracleLoad{Quant::kAsStored, EmbedScale::kF32};

// e2b-vocab: the full 262,144-token vocabulary (a head the argmax splits over many workgroups).
// Last prompt logits of every prompt; the greedy continuation of the first (on lavapipe each
// step's [262144, 32] head costs ~2 s, so one prompt keeps the test short).
using ForwardGpuVocab = GpuTest;

TEST_F(ForwardGpuVocab, LastPromptLogitsAndGreedyTokensMatchGolden) {
  ThreadPool pool(2);
  const auto dir = test::shared_fixtures() / "gemma4-text" / "e2b-vocab";
  const test::VocabGolden golden = test::read_vocab_golden(dir);
  auto m = Model::load(dir, kOracleLoad, pool);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const Model& model = **m;
  const int64_t V = golden.vocab;
  ASSERT_EQ(V, model.config().text.vocab_size);
  ASSERT_FALSE(golden.prompts.empty());
  auto f = GpuForward::create(*ctx_, model, pool, 64, 8);
  ASSERT_TRUE(f.ok()) << f.error().message;
  GpuForward& fwd = **f;
  std::vector<float> logits(static_cast<size_t>(V)), cpu_logits(logits.size());
  for (size_t p = 0; p < golden.prompts.size(); ++p) {
    const test::VocabPrompt& prompt = golden.prompts[p];
    fwd.reset();
    ASSERT_TRUE(fwd.prefill(prompt.ids, logits.data()).ok());
    CpuForward cpu(model, pool, 64, 8);
    ASSERT_TRUE(cpu.prefill(prompt.ids, cpu_logits.data()).ok());
    const float d_golden = test::max_abs_diff(logits.data(), &golden.last_prompt_logits[p * V], V);
    const float d_cpu = test::max_abs_diff(logits.data(), cpu_logits.data(), V);
    std::printf("[e2b-vocab prompt %zu] last prompt logits max|diff| vs golden %.3e, vs CPU %.3e\n",
                p, double(d_golden), double(d_cpu));
    EXPECT_LE(d_golden, kTol) << "prompt " << p;
    EXPECT_LE(d_cpu, kTol) << "prompt " << p;
    EXPECT_EQ(test::argmax(logits.data(), V), prompt.greedy_tokens.front()) << "prompt " << p;
    if (p > 0) continue;
    std::vector<int32_t> tokens{test::argmax(logits.data(), V)};
    while (tokens.size() < prompt.greedy_tokens.size()) {
      auto id = fwd.decode_greedy(tokens.back());
      ASSERT_TRUE(id.ok()) << id.error().message;
      tokens.push_back(*id);
    }
    EXPECT_EQ(tokens, prompt.greedy_tokens) << "prompt " << p;
  }
}

// e2b-vocab with Q8_0 and Q4_0 weights: the first prompt's last logits against the CPU with the
// same bytes, and whether the first greedy token still agrees with BF16's (printed only; the
// continuation is left out for the head's cost on lavapipe, see above).
TEST_F(ForwardGpuVocab, QuantizedWeightsMatchTheCpuWithTheSameWeights) {
  ThreadPool pool(2);
  const auto dir = test::shared_fixtures() / "gemma4-text" / "e2b-vocab";
  const test::VocabGolden golden = test::read_vocab_golden(dir);
  ASSERT_FALSE(golden.prompts.empty());
  const test::VocabPrompt& prompt = golden.prompts.front();
  for (Quant quant : {Quant::kQ8_0, Quant::kQ4_0}) {
    const char* qname = quant == Quant::kQ8_0 ? "Q8_0" : "Q4_0";
    auto m = Model::load(dir, LoadOptions{quant, EmbedScale::kF32}, pool);
    ASSERT_TRUE(m.ok()) << m.error().message;
    const int64_t V = golden.vocab;
    auto f = GpuForward::create(*ctx_, **m, pool, 64, 8);
    ASSERT_TRUE(f.ok()) << f.error().message;
    CpuForward cpu(**m, pool, 64, 8);
    std::vector<float> logits(static_cast<size_t>(V)), cpu_logits(logits.size());
    ASSERT_TRUE((*f)->prefill(prompt.ids, logits.data()).ok());
    ASSERT_TRUE(cpu.prefill(prompt.ids, cpu_logits.data()).ok());
    const float d = test::max_abs_diff(logits.data(), cpu_logits.data(), V);
    const int32_t first = test::argmax(logits.data(), V);
    std::printf("[e2b-vocab %s] last prompt logits max|diff| vs CPU %.3e; first greedy token %s "
                "BF16's\n",
                qname, double(d), first == prompt.greedy_tokens.front() ? "equals" : "differs from");
    EXPECT_LE(d, kTol) << qname;
    EXPECT_EQ(first, test::argmax(cpu_logits.data(), V)) << qname;
  }
}

}  // namespace
}  // namespace infer::gpu
