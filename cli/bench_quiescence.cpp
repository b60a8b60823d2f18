// The quiescence benchmark (bench_quiescence.h): one exact pass picks the tokens; each threshold
// then runs beside a fresh exact forward on them, compared and timed token by token.
#include "cli/bench_quiescence.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "cli/backend.h"
#include "cli/bench_output.h"
#include "cli/model_choice.h"
#include "model/cpu_forward.h"
#include "model/model.h"
#include "model/quiescence.h"
#include "model/thread_pool.h"

namespace infer::cli {
namespace {

using Clock = std::chrono::steady_clock;

int32_t argmax(const float* x, int64_t n) { return int32_t(std::max_element(x, x + n) - x); }

// KL(p || q) of two logit rows, in nats.
double kl(const float* p, const float* q, int64_t V) {
  const double mp = *std::max_element(p, p + V), mq = *std::max_element(q, q + V);
  double sp = 0, sq = 0;
  for (int64_t i = 0; i < V; ++i) {
    sp += std::exp(double(p[i]) - mp);
    sq += std::exp(double(q[i]) - mq);
  }
  const double lsp = std::log(sp), lsq = std::log(sq);
  double d = 0;
  for (int64_t i = 0; i < V; ++i) {
    const double lp = double(p[i]) - mp - lsp, lq = double(q[i]) - mq - lsq;
    d += std::exp(lp) * (lp - lq);
  }
  return std::max(d, 0.0);
}

// An exact forward and a quiescent one on the same backend, made once and reset per threshold
// (on the GPU each holds its own copy of the weights: made per threshold, uploads would dominate).
struct Pair {
  std::unique_ptr<Forward> exact, quiet;
  CpuForward* cpu = nullptr;       // `quiet` on the CPU
  gpu::GpuForward* gpu = nullptr;  // `quiet` on the GPU

  Result<void> set_quiescence(const QuiescenceConfig* q) {
    if (gpu != nullptr) return gpu->set_quiescence(q);
    cpu->set_quiescence(q);
    return Ok{};
  }
  const QuiescenceStats& stats() const {
    return gpu != nullptr ? *gpu->quiescence_stats() : *cpu->quiescence_stats();
  }
};

Result<Pair> make_pair(gpu::VulkanContext* ctx, const Model& model, ThreadPool& pool,
                       int64_t max_positions) {
  Pair p;
  if (ctx == nullptr) {
    p.exact = std::make_unique<CpuForward>(model, pool, max_positions);
    auto quiet = std::make_unique<CpuForward>(model, pool, max_positions);
    p.cpu = quiet.get();
    p.quiet = std::move(quiet);
    return p;
  }
  INFER_TRY(p.exact, gpu::GpuForward::create(*ctx, model, pool, max_positions));
  INFER_TRY(std::unique_ptr<gpu::GpuForward> quiet,
            gpu::GpuForward::create(*ctx, model, pool, max_positions));
  p.gpu = quiet.get();
  p.quiet = std::move(quiet);
  return p;
}

// Deterministic prompt ids in [3, vocab) when no --prompt-ids is given.
std::vector<int32_t> default_prompt(int64_t n, int64_t vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint32_t s = 12345;
  ids[0] = 2;  // <bos>
  for (size_t i = 1; i < ids.size(); ++i) {
    s = s * 1664525u + 1013904223u;
    ids[i] = int32_t(3 + (s >> 8) % uint32_t(vocab - 3));
  }
  return ids;
}

}  // namespace

Result<void> run_bench_quiescence(const Options& opts) {
  INFER_TRY(std::unique_ptr<gpu::VulkanContext> ctx, open_gpu(opts));  // null without --gpu
  INFER_TRY(ModelChoice choice, choose_model(opts));
  INFER_TRY(LoadedModel loaded, load_model_sized(choice, opts));
  const std::unique_ptr<Model> model = std::move(loaded.model);
  ThreadPool& pool = *loaded.pool;
  const int threads = loaded.threads.threads;
  const TextConfig& tc = model->config().text;
  const int64_t V = tc.vocab_size, N = *opts.bench_quiescence;
  const int64_t ple_vocab =
      tc.hidden_size_per_layer_input > 0 ? tc.vocab_size_per_layer_input : tc.vocab_size;
  const std::vector<int32_t> prompt =
      opts.prompt_ids ? *opts.prompt_ids : default_prompt(16, std::min(V, ple_vocab));
  const int64_t max_positions = int64_t(prompt.size()) + N + 1;
  std::fprintf(stderr, "bench-quiescence: %s, %s, %d threads, %s weights, %lld tokens\n",
               choice.dir.string().c_str(), ctx ? "vulkan" : "cpu", threads,
               quant_name(opts.quant), (long long)N);
  INFER_TRY(Pair pair, make_pair(ctx.get(), *model, pool, max_positions));

  // The stream: the exact model's greedy tokens, then teacher-forced in every pass.
  std::vector<float> ref(static_cast<size_t>(V)), logits(static_cast<size_t>(V));
  std::vector<int32_t> tokens(static_cast<size_t>(N));
  {
    Forward& fwd = *pair.exact;
    INFER_TRY_VOID(fwd.prefill(prompt, logits.data()));
    for (int64_t t = 0; t < N; ++t) {
      tokens[size_t(t)] = argmax(logits.data(), V);
      INFER_TRY_VOID(fwd.decode(tokens[size_t(t)], logits.data()));
    }
  }

  // Each threshold runs beside its own exact forward, token by token, so both are timed under the
  // same load (the machine is shared); speedup = median exact ms / median quiescent ms.
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  std::vector<double> exact_ms(static_cast<size_t>(N)), quiet_ms(static_cast<size_t>(N));
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + ptrdiff_t(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  for (float threshold : {0.0f, 1e-4f, 3e-4f, 1e-3f, 3e-3f, 1e-2f, 3e-2f, 1e-1f}) {
    Forward& exact = *pair.exact;
    Forward& fwd = *pair.quiet;
    exact.reset();
    fwd.reset();
    QuiescenceConfig qc;
    qc.threshold = threshold;
    INFER_TRY_VOID(pair.set_quiescence(&qc));  // fresh policy state and stats
    INFER_TRY_VOID(exact.prefill(prompt, ref.data()));
    INFER_TRY_VOID(fwd.prefill(prompt, logits.data()));
    double kl_sum = 0, kl_max = 0, v_short = 0, v_long = 0;
    int64_t agree = 0;
    for (int64_t t = 0; t < N; ++t) {
      const auto t0 = Clock::now();
      INFER_TRY_VOID(exact.decode(tokens[size_t(t)], ref.data()));
      const auto t1 = Clock::now();
      INFER_TRY_VOID(fwd.decode(tokens[size_t(t)], logits.data()));
      const auto t2 = Clock::now();
      exact_ms[size_t(t)] = 1e3 * std::chrono::duration<double>(t1 - t0).count();
      quiet_ms[size_t(t)] = 1e3 * std::chrono::duration<double>(t2 - t1).count();
      const float* r = ref.data();
      agree += argmax(r, V) == argmax(logits.data(), V);
      const double d = kl(r, logits.data(), V);
      kl_sum += d;
      kl_max = std::max(kl_max, d);
      v_short += pair.stats().velocity_short;
      v_long += pair.stats().velocity_long;
    }
    const double e_ms = median(exact_ms), ms = median(quiet_ms);
    const QuiescenceStats& st = pair.stats();
    rows.push_back({{"threshold", threshold},
                    {"skipped_token_fraction", double(st.skipped_tokens) / double(N)},
                    {"skipped_layer_fraction",
                     double(st.skipped_layers) / double(N * tc.num_hidden_layers)},
                    {"exact_ms_per_token_median", e_ms},
                    {"decode_ms_per_token_median", ms},
                    {"speedup", e_ms / ms},
                    {"greedy_agreement", double(agree) / double(N)},
                    {"mean_kl", kl_sum / double(N)},
                    {"max_kl", kl_max},
                    {"mean_velocity_short", v_short / double(N)},
                    {"mean_velocity_long", v_long / double(N)}});
    std::fprintf(stderr,
                 "  threshold %-7g skipped layers %5.1f%%  speedup %.2fx  agree %.3f  KL %.3g\n",
                 threshold, 100.0 * double(st.skipped_layers) / double(N * tc.num_hidden_layers),
                 e_ms / ms, double(agree) / double(N), kl_sum / double(N));
  }
  const Quiescence probe(QuiescenceConfig{}, tc.num_hidden_layers, tc.hidden_size, 1);
  nlohmann::ordered_json j;
  j["bench"] = "quiescence";
  j["model_dir"] =
      choice.random_config.empty() ? choice.dir.string() : choice.random_config.string();
  j["generated_in_memory"] = !choice.random_config.empty() || choice.demo;
  j["quant"] = quant_name(opts.quant);
  j["backend"] = ctx ? "vulkan" : "cpu";
  if (ctx) j["device"] = ctx->info().name;
  j["threads"] = threads;
  j["prompt_tokens"] = prompt.size();
  j["decode_tokens"] = N;
  j["layers"] = tc.num_hidden_layers;
  j["skip_depth"] = probe.skip_depth();
  j["policy"] = {{"short_alpha", QuiescenceConfig{}.short_alpha},
                 {"long_alpha", QuiescenceConfig{}.long_alpha},
                 {"max_run", QuiescenceConfig{}.max_run},
                 {"rule", "skip iff ema_short < T and ema_long < T (velocity: max over probes)"}};
  j["thresholds"] = rows;
  return write_bench_json(opts, j);
}

}  // namespace infer::cli
