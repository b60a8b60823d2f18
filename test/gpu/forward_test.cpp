// The whole GPU forward pass against the CPU path and the golden fixtures (GEMMA4_TEXT.md §9) on
// every fixture: prompt logits, greedy tokens through the replayed decode recording and through
// decode_greedy, chunked prefill; then Q8_0 and Q4_0 weights against the CPU with the same bytes;
// the stacked q|k|v projection against separate matvecs; dispatches and barriers per token
// (e2b-vocab, the whole vocabulary: forward_vocab_gpu_test.cpp).
#include "gpu/gpu_forward.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gpu/gpu_weights.h"
#include "gpu/ops/matvec.h"
#include "model/cpu_forward.h"
#include "model/model.h"
#include "model/ops/matmul.h"
#include "model/thread_pool.h"
#include "test/gpu/f16_slack.h"
#include "test/gpu/forward_fixture_test.h"
#include "test/gpu/gpu_test_env.h"
#include "test/model/golden_fixture.h"
#include "test/test_paths.h"

namespace infer::gpu {
namespace {

// The fixtures' bound for an fp32 engine. The GPU sums in f32 in another order than the CPU
// (subgroup trees vs SIMD lanes); over these models' depth that moves logits by ~1e-5, far
// inside the bound, so the CPU comparison uses the same bound. Where prefill's products take f16
// operands (the tensor-core kernel of VK_KHR_cooperative_matrix), f16_slack (f16_slack.h) adds
// what f16 operands move the logits by.
constexpr float kTol = test::kGoldenTol;
constexpr int64_t kMaxPositions = test::kGoldenMaxPositions;
// The oracle ran in fp32, so the embedding scales are fp32(√H), fp32(√P) (§4.2).
const LoadOptions kOracleLoad{Quant::kAsStored, EmbedScale::kF32};

using Case = test::FixtureCase;

class ForwardGpu : public GpuFixtureTest {
 protected:
  std::unique_ptr<Model> load(Quant quant) {
    auto m = Model::load(dir_, LoadOptions{quant, EmbedScale::kF32}, pool_);
    EXPECT_TRUE(m.ok()) << m.error().message;
    return m.ok() ? std::move(m).value() : nullptr;
  }

  std::unique_ptr<GpuForward> gpu(VulkanContext& ctx, const Model& model, int64_t chunk) {
    auto f = GpuForward::create(ctx, model, pool_, kMaxPositions, chunk);
    EXPECT_TRUE(f.ok()) << f.error().message;
    return f.ok() ? std::move(f).value() : nullptr;
  }

  float f16_slack(const std::function<std::vector<float>()>& run) {
    return gpu::f16_slack(*ctx_, GetParam().name, run);
  }

  // Prompt logits [T, V] of one prefill with `fwd`.
  std::vector<float> prompt_logits(Forward& fwd) {
    std::vector<float> logits(golden_.prompt_ids.size() * size_t(golden_.vocab));
    auto r = fwd.prefill(golden_.prompt_ids, logits.data(), true);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return logits;
  }

  // Greedy tokens after the prompt through decode(id, logits); the worst step logits error
  // against `want_logits` ([16, V]) while the tokens agree with `want_tokens`. `steps` (if
  // given) receives every step's logits.
  std::vector<int32_t> greedy(Forward& fwd, const std::vector<int32_t>& want_tokens,
                              const std::vector<float>& want_logits, float* worst,
                              std::vector<float>* steps = nullptr) {
    const int64_t V = golden_.vocab;
    std::vector<float> logits(static_cast<size_t>(V));
    EXPECT_TRUE(fwd.prefill(golden_.prompt_ids, logits.data()).ok());
    std::vector<int32_t> tokens;
    bool diverged = false;
    *worst = 0.0f;
    for (size_t k = 0; k < golden_.greedy_tokens.size(); ++k) {
      if (!diverged && !want_logits.empty()) {
        *worst =
            std::max(*worst, test::max_abs_diff(logits.data(), &want_logits[k * size_t(V)], V));
      }
      if (steps != nullptr) steps->insert(steps->end(), logits.begin(), logits.end());
      tokens.push_back(test::argmax(logits.data(), V));
      // Past the first divergence the reference logits describe another stream.
      diverged |= k >= want_tokens.size() || tokens.back() != want_tokens[k];
      if (k + 1 < golden_.greedy_tokens.size()) {
        auto r = fwd.decode(tokens.back(), logits.data());
        EXPECT_TRUE(r.ok()) << r.error().message;
      }
    }
    return tokens;
  }

  // The logits after the prompt, then after each of `tokens` but the last, decoded in turn: a
  // stream forced along `tokens`, so that two runs (f16_slack's) compare step by step even where
  // their own greedy choices would part.
  std::vector<float> forced_steps(Forward& fwd, const std::vector<int32_t>& tokens) {
    const size_t V = size_t(golden_.vocab);
    std::vector<float> steps(tokens.size() * V);
    EXPECT_TRUE(fwd.prefill(golden_.prompt_ids, steps.data()).ok());
    for (size_t k = 0; k + 1 < tokens.size(); ++k) {
      EXPECT_TRUE(fwd.decode(tokens[k], &steps[(k + 1) * V]).ok());
    }
    return steps;
  }

  // The same through decode_greedy: only ids come back.
  std::vector<int32_t> greedy_on_device(GpuForward& fwd) {
    std::vector<float> logits(static_cast<size_t>(golden_.vocab));
    EXPECT_TRUE(fwd.prefill(golden_.prompt_ids, logits.data()).ok());
    std::vector<int32_t> tokens{test::argmax(logits.data(), golden_.vocab)};
    while (tokens.size() < golden_.greedy_tokens.size()) {
      auto id = fwd.decode_greedy(tokens.back());
      EXPECT_TRUE(id.ok()) << id.error().message;
      if (!id.ok()) break;
      tokens.push_back(*id);
    }
    return tokens;
  }
};

TEST_P(ForwardGpu, PromptLogitsMatchCpuAndGoldenInEveryChunking) {
  auto model = load(Quant::kAsStored);
  ASSERT_NE(model, nullptr);
  CpuForward cpu(*model, pool_, kMaxPositions, kMaxPositions);
  const std::vector<float> want = prompt_logits(cpu);
  const int64_t n = int64_t(want.size());
  const float tol = kTol + f16_slack([&] {
    cpu.reset();
    return prompt_logits(cpu);
  });
  // One chunk, and chunks that split the prompt with a ragged tail (1-token chunks replay the
  // decode recording, which the greedy test covers).
  for (int64_t chunk : {kMaxPositions, int64_t(5), int64_t(16)}) {
    auto fwd = gpu(*ctx_, *model, chunk);
    ASSERT_NE(fwd, nullptr);
    const std::vector<float> got = prompt_logits(*fwd);
    const float d_cpu = test::max_abs_diff(got.data(), want.data(), n);
    const float d_golden = test::max_abs_diff(got.data(), golden_.prompt_logits.data(), n);
    std::printf("[%s chunk %lld] prompt logits max|diff| vs CPU %.3e, vs golden %.3e\n",
                GetParam().name, (long long)chunk, double(d_cpu), double(d_golden));
    EXPECT_LE(d_cpu, tol) << "chunk " << chunk;
    EXPECT_LE(d_golden, tol) << "chunk " << chunk;
    EXPECT_EQ(fwd->position(), int64_t(golden_.prompt_ids.size()));
  }
}

// A prompt past the fixtures' length in chunks of 512, as the CLI feeds one on a big GPU
// (gpu::default_prefill_chunk): its last logits against the CPU.
TEST_P(ForwardGpu, LongPromptInChunksOf512MatchesTheCpu) {
  auto model = load(Quant::kAsStored);
  ASSERT_NE(model, nullptr);
  const int64_t n = 520, max_positions = 1024, V = golden_.vocab;
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = int32_t((i * 7919 + 13) % V);
  std::vector<float> want(static_cast<size_t>(V)), got(static_cast<size_t>(V));
  CpuForward cpu(*model, pool_, max_positions, 512);
  ASSERT_TRUE(cpu.prefill(ids, want.data()).ok());
  const float tol = kTol + f16_slack([&] {
    std::vector<float> logits(static_cast<size_t>(V));
    cpu.reset();
    EXPECT_TRUE(cpu.prefill(ids, logits.data()).ok());
    return logits;
  });
  auto f = GpuForward::create(*ctx_, *model, pool_, max_positions, 512);
  ASSERT_TRUE(f.ok()) << f.error().message;
  ASSERT_TRUE((*f)->prefill(ids, got.data()).ok());
  const float d = test::max_abs_diff(got.data(), want.data(), V);
  std::printf("[%s] 520-token prompt in chunks of 512: last logits max|diff| vs CPU %.3e\n",
              GetParam().name, double(d));
  EXPECT_LE(d, tol);
}

TEST_P(ForwardGpu, GreedyDecodeMatchesGoldenThroughBothDecodePaths) {
  auto model = load(Quant::kAsStored);
  ASSERT_NE(model, nullptr);
  // The CPU's step logits are golden's within kTol; f16 operands move them by the slack.
  const float tol = kTol + f16_slack([&] {
    CpuForward cpu(*model, pool_, kMaxPositions, 64);
    return forced_steps(cpu, golden_.greedy_tokens);
  });
  for (VulkanContext* ctx : {ctx_, staging_ctx_}) {
    auto fwd = gpu(*ctx, *model, 64);
    ASSERT_NE(fwd, nullptr);
    float worst = 0.0f;
    const std::vector<int32_t> tokens =
        greedy(*fwd, golden_.greedy_tokens, golden_.greedy_logits, &worst);
    std::printf("[%s%s] decode-step logits max|diff| vs golden %.3e\n", GetParam().name,
                ctx == staging_ctx_ ? " staged" : "", double(worst));
    EXPECT_EQ(tokens, golden_.greedy_tokens);
    EXPECT_LE(worst, tol);
    const StepTiming& t = fwd->last_step_timing();
    EXPECT_GT(t.wait_s, 0.0);
    EXPECT_GT(t.host_s + t.submit_s, 0.0);

    fwd->reset();
    EXPECT_EQ(fwd->position(), 0);
    EXPECT_EQ(greedy_on_device(*fwd), golden_.greedy_tokens);
    EXPECT_EQ(fwd->position(),
              int64_t(golden_.prompt_ids.size() + golden_.greedy_tokens.size() - 1));
  }
}

TEST_P(ForwardGpu, RejectsStreamsPastMaxPositionsAndBadIds) {
  auto model = load(Quant::kAsStored);
  ASSERT_NE(model, nullptr);
  const int64_t n = int64_t(golden_.prompt_ids.size());
  auto f = GpuForward::create(*ctx_, *model, pool_, n - 1, 8);
  ASSERT_TRUE(f.ok()) << f.error().message;
  GpuForward& fwd = **f;
  std::vector<float> logits(static_cast<size_t>(golden_.vocab));
  EXPECT_FALSE(fwd.prefill(golden_.prompt_ids, logits.data()).ok());
  EXPECT_FALSE(fwd.prefill({}, logits.data()).ok());
  EXPECT_FALSE(fwd.decode(int32_t(golden_.vocab), logits.data()).ok());
  EXPECT_FALSE(fwd.decode(-1, logits.data()).ok());
  EXPECT_FALSE(fwd.decode_greedy(int32_t(golden_.vocab)).ok());
  EXPECT_EQ(fwd.position(), 0);
  EXPECT_FALSE(GpuForward::create(*ctx_, *model, pool_, 0, 8).ok());
}

// Quantized weights: the GPU must compute what the CPU computes with the same bytes (the bound
// is the fp32 one: both dequantize exactly and sum in f32). Greedy agreement with the BF16
// tokens is reported, not bounded: these random tiny models have top-2 gaps of ~0.03 and
// weight rounding moves logits by 0.5-10 (test/model/forward_quant_test.cpp).
TEST_P(ForwardGpu, QuantizedWeightsMatchTheCpuWithTheSameWeights) {
  for (Quant quant : {Quant::kQ8_0, Quant::kQ4_0}) {
    const char* qname = quant == Quant::kQ8_0 ? "Q8_0" : "Q4_0";
    auto model = load(quant);
    ASSERT_NE(model, nullptr);
    CpuForward cpu(*model, pool_, kMaxPositions, 64);
    auto fwd = gpu(*ctx_, *model, 64);
    ASSERT_NE(fwd, nullptr);
    const std::vector<float> want = prompt_logits(cpu);
    const std::vector<float> got = prompt_logits(*fwd);
    const float d_prompt = test::max_abs_diff(got.data(), want.data(), int64_t(want.size()));

    // Greedy on both, the CPU's tokens and step logits as the reference.
    cpu.reset();
    fwd->reset();
    float unused = 0.0f, d_steps = 0.0f;
    std::vector<float> cpu_steps;
    const std::vector<int32_t> cpu_tokens = greedy(cpu, {}, {}, &unused, &cpu_steps);
    const std::vector<int32_t> gpu_tokens = greedy(*fwd, cpu_tokens, cpu_steps, &d_steps);
    // The prompt's logits lead the steps' (greedy's first), so one slack covers both.
    const float tol = kTol + f16_slack([&] {
      cpu.reset();
      std::vector<float> all = prompt_logits(cpu);
      cpu.reset();
      const std::vector<float> steps = forced_steps(cpu, cpu_tokens);
      all.insert(all.end(), steps.begin(), steps.end());
      return all;
    });
    size_t agree = 0;
    while (agree < gpu_tokens.size() && gpu_tokens[agree] == golden_.greedy_tokens[agree]) ++agree;
    std::printf("[%s %s] max logit error vs CPU: prompt %.3e, decode steps %.3e; greedy vs CPU %s; "
                "greedy prefix agreement vs BF16 %zu/%zu\n",
                GetParam().name, qname, double(d_prompt), double(d_steps),
                gpu_tokens == cpu_tokens ? "identical" : "differs", agree,
                golden_.greedy_tokens.size());
    RecordProperty(std::string(qname) + "_max_logit_error", std::to_string(std::max(d_prompt, d_steps)));
    RecordProperty(std::string(qname) + "_greedy_agreement", int(agree));
    EXPECT_LE(d_prompt, tol) << qname;
    EXPECT_LE(d_steps, tol) << qname;
    EXPECT_EQ(gpu_tokens, cpu_tokens) << qname;
  }
}

// The stacked q|k|v projection (gpu/gpu_weights.h) computes, per token, [q | k | v] at the
// recorded offsets, as q_proj, k_proj and v_proj do apart (e2b-mini: KV-shared layers with q
// alone; dense-mini: K=V layers without v rows). Same kernel, same row sums: a slack of 1e-5
// relative only absorbs a different row-to-workgroup assignment, far below a wrong row's error.
TEST_P(ForwardGpu, StackedQkvProjectionEqualsSeparateMatvecs) {
  for (Quant quant : {Quant::kAsStored, Quant::kQ4_0}) {
    auto model = load(quant);
    ASSERT_NE(model, nullptr);
    const ModelConfig& cfg = model->config();
    auto w = GpuWeights::upload(*ctx_, cfg, model->weights());
    ASSERT_TRUE(w.ok()) << w.error().message;
    const int64_t H = cfg.text.hidden_size, T = 3;  // one token and a few (the T > 1 kernels)
    std::vector<float> x(size_t(T * H));
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i)) + 0.1f;
    for (size_t i = 0; i < cfg.layers.size(); ++i) {
      SCOPED_TRACE("layer " + std::to_string(i) + (quant == Quant::kQ4_0 ? " Q4_0" : ""));
      const LayerWeights& lw = model->weights().layers[i];
      const GpuLayerWeights& g = (*w)->layers[i];
      const int64_t R = g.qkv_proj.rows;
      ASSERT_EQ(R, lw.q_proj.rows + lw.k_proj.rows + lw.v_proj.rows);
      EXPECT_EQ(cfg.layers[i].kv_shared, lw.k_proj.rows == 0);
      EXPECT_EQ(int64_t(g.qkv_k_offset), lw.q_proj.rows);
      EXPECT_EQ(int64_t(g.qkv_v_offset),
                lw.q_proj.rows + (lw.v_proj.rows > 0 ? lw.k_proj.rows : 0));
      auto op = MatvecOp::create(*ctx_, g.qkv_proj.format);
      ASSERT_TRUE(op.ok()) << op.error().message;
      for (int64_t n : {int64_t(1), T}) {
        std::vector<float> y(size_t(n * R));
        ASSERT_TRUE(run_matvec(*ctx_, **op, g.qkv_proj, x.data(), n, y.data()).ok());
        int64_t row0 = 0;
        for (const Matrix* m : {&lw.q_proj, &lw.k_proj, &lw.v_proj}) {
          if (m->rows == 0) continue;
          auto part = upload_matrix(*ctx_, *m, "part");
          ASSERT_TRUE(part.ok()) << part.error().message;
          std::vector<float> want(size_t(n * m->rows));
          ASSERT_TRUE(run_matvec(*ctx_, **op, *part, x.data(), n, want.data()).ok());
          for (int64_t t = 0; t < n; ++t) {
            for (int64_t r = 0; r < m->rows; ++r) {
              const float wv = want[size_t(t * m->rows + r)];
              ASSERT_NEAR(y[size_t(t * R + row0 + r)], wv, 1e-5f * (1.0f + std::fabs(wv)))
                  << "token " << t << " of " << n << ", row " << row0 + r;
            }
          }
          row0 += m->rows;
        }
      }
    }
  }
}

// A decode token records one matvec for q/k/v, one qkv_prep and one attend per layer, and each
// product that ends a block carries the residual step (E2B shape: 8 a layer, was 17), and every
// dispatch waits behind at most one barrier.
TEST_P(ForwardGpu, DecodeRecordsFewDispatchesPerLayer) {
  auto model = load(Quant::kAsStored);
  ASSERT_NE(model, nullptr);
  auto fwd = gpu(*ctx_, *model, 8);
  ASSERT_NE(fwd, nullptr);
  const RecordingCounts c = fwd->decode_counts();
  const int L = model->config().text.num_hidden_layers;
  const bool ple = model->config().text.hidden_size_per_layer_input > 0;
  const bool moe = model->config().text.enable_moe_block;
  // Per layer, at most: qkv matvec, qkv_prep, attend (two dispatches, scores and softmax · V;
  // one split, with qkv_prep in it), o_proj, add_norm, gate_up, down, add_norm; PLE adds gate,
  // gelu_mul, projection, add_norm; MoE adds router (2), rms_norm, experts (2), norm_sum, and its
  // down projection's add_norm apart. Outside the layers: embed (+ PLE projection and inputs), first
  // norm, head matvec, softcap, argmax.
  const int per_layer = 9 + (ple ? 4 : 0) + (moe ? 7 : 0);
  std::printf("[%s] decode: %d dispatches, %d barriers (%d buffer barriers), %d layers\n",
              GetParam().name, c.dispatches, c.barrier_commands, c.buffer_barriers, L);
  EXPECT_LE(c.dispatches, per_layer * L + 7);
  EXPECT_GE(c.dispatches, 6 * L);
  EXPECT_LE(c.barrier_commands, c.dispatches);
  EXPECT_GE(c.buffer_barriers, c.barrier_commands);
  // qkv_prep is folded into the split decode (AttentionOps::prep_attend), which takes every
  // layer of the fixtures (head dims <= 256): a dispatch a layer more with it apart.
  const ScopedTuning apart(*ctx_, "attn_prep=off");
  auto fwd_apart = gpu(*ctx_, *model, 8);
  ASSERT_NE(fwd_apart, nullptr);
  EXPECT_EQ(fwd_apart->decode_counts().dispatches, c.dispatches + L);
}

INSTANTIATE_TEST_SUITE_P(ForwardFixtures, ForwardGpu,
                         ::testing::ValuesIn(test::kFixtureCases),
                         test::ParamName());

}  // namespace
}  // namespace infer::gpu
