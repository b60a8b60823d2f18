// The long-stream benchmarks (bench_stream.h). --bench-stream runs the Engine's loop, greedy, one
// token at a time from position 0, so every point is real work. --bench-context cannot afford that
// for 64K tokens on a CPU: it sets the cache to the state after N tokens with synthetic rows
// (CpuForward::synthesize_context; attention's cost depends on the keys' count, not their values)
// and times real decode steps from there, for the exact cache and the ring side by side.
#include "cli/bench_stream.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "actors/engine.h"
#include "base/clock.h"
#include "cli/backend.h"
#include "cli/bench_output.h"
#include "cli/model_choice.h"
#include "model/cpu_forward.h"
#include "model/model.h"
#include "model/sampling.h"
#include "model/thread_pool.h"

namespace infer::cli {
namespace {

using Clock = SteadyClock;

// Anonymous resident memory (statm resident - shared): the caches and buffers, not the mapped
// weights, whose pages come in as they are first read.
int64_t anon_rss_bytes() {
  std::ifstream f("/proc/self/statm");
  int64_t size = 0, resident = 0, shared = 0;
  f >> size >> resident >> shared;
  return (resident - shared) * int64_t(sysconf(_SC_PAGESIZE));
}

nlohmann::ordered_json ring_json(const std::optional<RingConfig>& r) {
  if (!r) return nullptr;
  return {{"anchors", r->anchors},
          {"window", r->window},
          {"recall", r->recall},
          {"evict", r->evict == EvictPolicy::kMass ? "mass" : "fifo"}};
}


// A point every `every` tokens: mean and max forward ms per token over them, and anonymous RSS.
class CurveSink : public actors::TokenSink {
 public:
  CurveSink(const actors::Engine& engine, int64_t n, int64_t every)
      : engine_(engine), n_(n), every_(every) {}
  actors::Verdict token(const actors::Step& s) override {
    const int64_t i = s.index + 1;
    const double ms = s.index == 0 ? engine_.prefill_ms() : engine_.last_decode_ms();
    sum_ms_ += ms;
    max_ms_ = std::max(max_ms_, ms);
    if (i % every_ == 0 || i == n_) {
      const int64_t k = i % every_ == 0 ? every_ : i % every_;
      points.push_back({{"tokens", i},
                        {"ms_per_token_mean", sum_ms_ / double(k)},
                        {"ms_per_token_max", max_ms_},
                        {"anon_rss_bytes", anon_rss_bytes()}});
      std::fprintf(stderr, "  %10lld tokens  %.3f ms/token (max %.3f)  RSS %.1f MB\n",
                   (long long)i, sum_ms_ / double(k), max_ms_, double(anon_rss_bytes()) / 1e6);
      sum_ms_ = max_ms_ = 0;
    }
    return actors::Verdict::kKeep;
  }

  nlohmann::ordered_json points = nlohmann::json::array();

 private:
  const actors::Engine& engine_;
  int64_t n_, every_;
  double sum_ms_ = 0, max_ms_ = 0;
};

// N greedy tokens through the Engine's loop from <bos> at position 0, each a real forward step.
Result<nlohmann::ordered_json> stream_curve(const Options& opts, const Model& model,
                                            ThreadPool& pool,
                                            const std::optional<RingConfig>& ring) {
  const int64_t n = *opts.bench_stream;
  const int64_t every = opts.bench_every.value_or(std::max<int64_t>(1, n / 50));
  INFER_TRY(std::unique_ptr<gpu::VulkanContext> gpu_ctx, open_gpu(opts));
  INFER_TRY(Backend backend, make_backend(std::move(gpu_ctx), model, pool, n + 1, ring));
  actors::EngineOptions o;
  o.max_positions = n + 2;
  actors::Engine engine(std::shared_ptr<Forward>(std::shared_ptr<void>(), backend.forward.get()),
                        std::move(o));
  CurveSink sink(engine, n, every);
  // <bos> at position 0 is prefilled: it is the curve's first step.
  const int32_t bos = model.config().text.bos_token_id;
  actors::TurnRequest turn;
  turn.input = std::span(&bos, 1);
  turn.max_tokens = n;
  turn.end_ids = actors::EndIds::kIgnore;
  if (actors::TurnOutcome out = engine.run_turn(turn, sink); out.error) return *out.error;
  return nlohmann::ordered_json{{"benchmark", "stream"},
                                {"backend", backend.name},
                                {"ring", ring_json(ring)},
                                {"tokens", n},
                                {"every", every},
                                {"points", std::move(sink.points)}};
}

// Median ms of steps.timed decode steps after steps.warmup untimed ones, from the state after
// `context` tokens (Fwd: CpuForward or gpu::GpuForward, both with synthesize_context).
template <class Fwd>
Result<double> decode_ms_after(Fwd& fwd, int64_t context, ContextSteps steps,
                               std::vector<float>& logits) {
  INFER_TRY_VOID(fwd.synthesize_context(context));
  int32_t next = 2;
  std::vector<double> ms;
  for (int i = 0; i < steps.warmup + steps.timed; ++i) {
    const auto t0 = Clock::now();
    INFER_TRY_VOID(fwd.decode(next, logits.data()));
    if (i >= steps.warmup) ms.push_back(seconds_since(t0) * 1e3);
    next = argmax(logits);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

Result<nlohmann::ordered_json> context_table(const Options& opts, const Model& model,
                                             ThreadPool& pool, std::optional<RingConfig> ring) {
  if (!ring) ring = RingConfig{};  // the defaults: 32 | 512 | 96, FIFO
  // One device for every point; each forward (weights uploaded again) is released before the next.
  INFER_TRY(std::unique_ptr<gpu::VulkanContext> gpu_ctx, open_gpu(opts));
  const ContextSteps steps = gpu_ctx ? kBenchContextStepsGpu : kBenchContextStepsCpu;
  std::vector<float> logits(size_t(model.config().text.vocab_size));
  nlohmann::ordered_json points = nlohmann::json::array();
  for (int64_t context : *opts.bench_context) {
    double ms[2];
    size_t kv_bytes[2];
    for (int mode = 0; mode < 2; ++mode) {  // 0: exact, 1: ring
      const int64_t max_positions = context + steps.warmup + steps.timed + 1;
      if (gpu_ctx) {
        INFER_TRY(std::unique_ptr<gpu::GpuForward> fwd,
                  mode == 0 ? gpu::GpuForward::create(*gpu_ctx, model, pool, max_positions)
                            : gpu::GpuForward::create(*gpu_ctx, model, pool, *ring));
        INFER_TRY(ms[mode], decode_ms_after(*fwd, context, steps, logits));
        kv_bytes[mode] = fwd->device_bytes();  // the GPU's: weights and activations included
        continue;
      }
      std::unique_ptr<CpuForward> fwd =
          mode == 0 ? std::make_unique<CpuForward>(model, pool, max_positions)
                    : std::make_unique<CpuForward>(model, pool, *ring);
      INFER_TRY(ms[mode], decode_ms_after(*fwd, context, steps, logits));
      kv_bytes[mode] = fwd->kv_bytes();
    }
    points.push_back({{"context", context},
                      {"exact_tokens_per_s", 1e3 / ms[0]},
                      {"ring_tokens_per_s", 1e3 / ms[1]},
                      {"exact_ms_per_token_median", ms[0]},
                      {"ring_ms_per_token_median", ms[1]},
                      {"exact_kv_bytes", kv_bytes[0]},
                      {"ring_kv_bytes", kv_bytes[1]}});
    std::fprintf(stderr,
                 "  %8lld tokens: exact %.3f tokens/s (%.1f MB), ring %.3f tokens/s (%.1f MB)\n",
                 (long long)context, 1e3 / ms[0], double(kv_bytes[0]) / 1e6, 1e3 / ms[1],
                 double(kv_bytes[1]) / 1e6);
  }
  return nlohmann::ordered_json{
      {"benchmark", "context"},
      {"backend", gpu_ctx ? "vulkan" : "cpu"},
      {"ring", ring_json(ring)},
      {"decode_steps", steps.timed},
      {"warmup_steps", steps.warmup},
      {"kv_bytes",
       gpu_ctx ? "device bytes of the whole forward (weights, caches, activations)"
               : "bytes of the KV caches"},
      {"synthetic_state",
       "each cache is set to the state after `context` tokens with synthetic K/V rows (FIFO ring; "
       "attention cost depends on the number of keys, not their values); the timed decode steps "
       "are real (the median of decode_steps after warmup_steps untimed ones)"},
      {"points", points}};
}

}  // namespace

Result<void> run_bench_stream(const Options& opts) {
  INFER_TRY(ModelChoice choice, choose_model(opts));
  INFER_TRY(LoadedModel loaded, load_model_sized(choice, opts));
  const std::unique_ptr<Model> model = std::move(loaded.model);
  ThreadPool& pool = *loaded.pool;
  const int threads = loaded.threads.threads;
  INFER_TRY(const std::optional<RingConfig> ring, ring_config(opts));
  std::fprintf(stderr, "bench: %s, %d threads, %s weights\n", choice.dir.string().c_str(),
               threads, quant_name(opts.quant));
  nlohmann::ordered_json j;
  if (opts.bench_stream) {
    INFER_TRY(j, stream_curve(opts, *model, pool, ring));
  } else {
    INFER_TRY(j, context_table(opts, *model, pool, ring));
  }
  j["model_dir"] = choice.random_config.empty() ? choice.dir.string()
                                                : choice.random_config.string();
  j["quant"] = quant_name(opts.quant);
  j["threads"] = threads;
  return write_bench_json(opts, j);
}

}  // namespace infer::cli
