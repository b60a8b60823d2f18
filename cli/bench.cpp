// The benchmark: load time, prefill of 512 deterministic pseudo-random ids (median of up to five
// runs after a warm-up), 128 greedy decode steps after it, the bandwidth bound measured on this
// machine, peak RSS and tokenizer speed. Figures are measured side by side in one run (DESIGN.md §10). With --gpu
// the same on the Vulkan backend, against the device's own read bandwidth (a compute shader
// streaming a large buffer; the copy bandwidth beside it), with the per-token split between
// host work, submit and wait, and the dispatches and barriers a decode token records.
#include "cli/bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <utility>
#include <nlohmann/json.hpp>
#include <vector>

#include "actors/engine.h"
#include "base/clock.h"
#include "cli/backend.h"
#include "cli/bench_output.h"
#include "cli/bench_memory.h"
#include "cli/bench_quiescence.h"
#include "cli/bench_stream.h"
#include "cli/bench_tools.h"
#include "cli/gpu_profile.h"
#include "cli/mem_bandwidth.h"
#include "cli/model_choice.h"
#include "gpu/gpu_bandwidth.h"
#include "model/model.h"
#include "model/ops/matmul.h"
#include "model/sampling.h"
#include "model/thread_pool.h"
#include "model/tokenizer/tokenizer.h"

namespace infer::cli {
namespace {

using Clock = SteadyClock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Deterministic pseudo-random ids in [0, V) (splitmix64), the same on every machine.
std::vector<int32_t> bench_ids(int64_t n, int64_t V) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint64_t s = 0x5EED;
  for (auto& id : ids) {
    s += 0x9E3779B97F4A7C15ULL;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    id = int32_t((z ^ (z >> 31)) % uint64_t(V));
  }
  return ids;
}

size_t peak_rss_bytes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return size_t(ru.ru_maxrss) * 1024;  // Linux reports kilobytes
}


// Every GPU tuning field as the forward runs it (gpu/tuning.h): numbers as numbers.
nlohmann::ordered_json tuning_json(const gpu::VulkanContext& ctx, const ModelConfig& cfg) {
  nlohmann::ordered_json t = nlohmann::ordered_json::object();
  for (const auto& [key, value] : gpu::effective_tuning(ctx, cfg)) {
    const bool number =
        !value.empty() && value.find_first_not_of("0123456789") == std::string::npos;
    t[key] = number ? nlohmann::ordered_json(std::stoull(value)) : nlohmann::ordered_json(value);
  }
  return t;
}

// The GPU bench's own fields: the device, its tuning, how its bandwidth was measured, memory
// used and where a decode step's time goes.
void add_gpu_fields(const gpu::VulkanContext& ctx, const ModelConfig& cfg,
                    const gpu::GpuForward& fwd, double upload_s,
                    const std::vector<double>& host_ms, const std::vector<double>& submit_ms,
                    const std::vector<double>& wait_ms, const gpu::CopyBandwidth& copy,
                    nlohmann::ordered_json& j) {
  const gpu::DeviceInfo& info = ctx.info();
  j["backend"] = "vulkan";
  j["device_name"] = info.name;
  j["device_type"] = gpu::device_type_name(info.type);
  j["device_driver"] = info.driver_name;
  j["device_driver_info"] = info.driver_info;
  j["device_uma"] = info.uma;
  j["gpu_tuning"] = tuning_json(ctx, cfg);
  j["gpu_upload_s"] = upload_s;
  j["gpu_memory_bytes"] = fwd.device_bytes();
  // memory_bandwidth_* above are the device's figures here, measured as said.
  j["memory_bandwidth_measure"] =
      "device read of memory_bandwidth_buffer_bytes by a compute shader (uvec4 loads, one word "
      "written per workgroup), several sweeps per fence-timed submit; GB/s = bytes read / s";
  j["memory_bandwidth_copy_gb_per_s"] = copy.best_gb_per_s;
  j["memory_bandwidth_copy_gb_per_s_median"] = copy.median_gb_per_s;
  j["memory_bandwidth_copy_measure"] =
      "device buffer-to-buffer copy, fence-timed; GB/s = (bytes read + bytes written) / s = 2 x "
      "copy bytes / s";
  const gpu::RecordingCounts counts = fwd.decode_counts();
  j["decode_dispatches_per_token"] = counts.dispatches;
  j["decode_barriers_per_token"] = counts.barrier_commands;
  j["decode_buffer_barriers_per_token"] = counts.buffer_barriers;
  j["decode_host_ms_median"] = median(host_ms);
  j["decode_submit_ms_median"] = median(submit_ms);
  j["decode_wait_ms_median"] = median(wait_ms);
}

// Per decode step: the forward's time and, on the GPU, its host / submit / wait split.
class DecodeTimes : public actors::TokenSink {
 public:
  explicit DecodeTimes(gpu::GpuForward* gpu) : gpu_(gpu) {
    for (auto* v : {&step_ms, &host_ms, &submit_ms, &wait_ms}) v->reserve(kBenchDecodeTokens);
  }
  void attach(const actors::Engine* engine) { engine_ = engine; }
  actors::Verdict token(const actors::Step& s) override {
    last_ns_ = actors::steady_ns();
    last_id = s.id;
    if (s.index == 0) {  // sampled from the prompt's logits: the clock starts here
      first_ns_ = last_ns_;
      return actors::Verdict::kKeep;
    }
    step_ms.push_back(engine_->last_decode_ms());
    if (gpu_ != nullptr) {
      const gpu::StepTiming& st = gpu_->last_step_timing();
      host_ms.push_back(st.host_s * 1e3);
      submit_ms.push_back(st.submit_s * 1e3);
      wait_ms.push_back(st.wait_s * 1e3);
    }
    return actors::Verdict::kKeep;
  }
  double total_s() const { return double(last_ns_ - first_ns_) * 1e-9; }

  std::vector<double> step_ms, host_ms, submit_ms, wait_ms;
  int32_t last_id = 0;

 private:
  gpu::GpuForward* gpu_;
  const actors::Engine* engine_ = nullptr;
  int64_t first_ns_ = 0, last_ns_ = 0;
};

// kBenchDecodeTokens decode steps after the prompt `ids`, greedy, end ids as ordinary tokens.
Result<void> bench_decode(Backend& backend, const std::vector<int32_t>& ids, DecodeTimes& times) {
  Forward& fwd = *backend.forward;
  fwd.reset();
  actors::EngineOptions o;
  o.max_positions = int64_t(ids.size()) + kBenchDecodeTokens + 1;
  o.prefill_chunk = std::max<int64_t>(1, int64_t(ids.size()));
  if (gpu::GpuForward* g = backend.gpu; g != nullptr) {
    o.decode_argmax = [g](int32_t id) { return g->decode_greedy(id); };
  }
  actors::Engine engine(std::shared_ptr<Forward>(std::shared_ptr<void>(), &fwd), std::move(o));
  times.attach(&engine);
  actors::TurnRequest turn;
  turn.input = ids;
  turn.max_tokens = kBenchDecodeTokens + 1;  // the first comes from the prompt's logits
  turn.end_ids = actors::EndIds::kIgnore;
  if (actors::TurnOutcome out = engine.run_turn(turn, times); out.error) return *out.error;
  return Ok{};
}

}  // namespace

Result<void> run_bench(const Options& opts) {
  if (opts.bench_stream || opts.bench_context) return run_bench_stream(opts);
  if (opts.bench_quiescence) return run_bench_quiescence(opts);
  if (opts.bench_memory) return run_bench_memory(opts);
  INFER_TRY(ModelChoice choice, choose_model(opts));
  INFER_TRY(std::unique_ptr<gpu::VulkanContext> gpu_ctx, open_gpu(opts));

  auto t0 = Clock::now();
  INFER_TRY(LoadedModel loaded, load_model_sized(choice, opts));
  const std::unique_ptr<Model> model = std::move(loaded.model);
  const double load_s = seconds_since(t0);
  ThreadPool& pool = *loaded.pool;
  const int threads = loaded.threads.threads;
  const TextConfig& text = model->config().text;
  const int64_t V = text.vocab_size;
  const int64_t T =
      std::min<int64_t>(kBenchPrefillTokens, text.max_position_embeddings - 1 - kBenchDecodeTokens);
  if (T < 1) return make_error(ErrorCode::kUnsupported, "max_position_embeddings is too small");

  t0 = Clock::now();
  INFER_TRY(Backend backend,
            make_backend(std::move(gpu_ctx), *model, pool, T + kBenchDecodeTokens + 1));
  const double backend_s = seconds_since(t0);  // GPU: upload and the decode recordings
  Forward& fwd = *backend.forward;
  std::vector<float> logits(static_cast<size_t>(V));
  const std::vector<int32_t> ids = bench_ids(T, V);

  // Prefill: one warm-up run (first-use work such as scratch buffers the prefill recordings
  // allocate, and clocks ramping up from an idle GPU: the H200's first runs of a 512-token E2B
  // prefill took 0.23 and 0.12 s, the third 0.05), then up to five timed runs, stopping early
  // once they have taken 30 s.
  fwd.reset();
  t0 = Clock::now();
  INFER_TRY_VOID(fwd.prefill(ids, logits.data()));
  const double prefill_warmup_s = seconds_since(t0);
  std::vector<double> prefill_s;
  double prefill_total = 0.0;
  while (prefill_s.size() < 5 && (prefill_s.empty() || prefill_total < 30.0)) {
    fwd.reset();
    t0 = Clock::now();
    INFER_TRY_VOID(fwd.prefill(ids, logits.data()));
    prefill_s.push_back(seconds_since(t0));
    prefill_total += prefill_s.back();
  }
  const double prefill_tok_s = double(T) / median(prefill_s);

  // Decode: greedy through the Engine's loop from the prompt, one timed step per token (on the
  // GPU the argmax is taken there, as generation does, and each step's host / submit / wait
  // split is kept).
  DecodeTimes times(backend.gpu);
  INFER_TRY_VOID(bench_decode(backend, ids, times));
  const std::vector<double>&step_ms = times.step_ms, &host_ms = times.host_ms,
                       &submit_ms = times.submit_ms, &wait_ms = times.wait_ms;
  const int32_t next = times.last_id;
  const double decode_tok_s = kBenchDecodeTokens / times.total_s();
  const size_t rss = peak_rss_bytes();  // before the bandwidth buffer inflates it
  nlohmann::ordered_json profile = nullptr;
  if (opts.profile && backend.gpu != nullptr) {
    INFER_TRY(profile, profile_gpu(*backend.gpu, next, ids, backend.gpu->max_chunk()));
  }

  nlohmann::json tokenizer_mb_s = nullptr;
  nlohmann::ordered_json tools = nullptr;
  const auto tok_path = choice.dir / "tokenizer.json";
  if (std::filesystem::exists(tok_path)) {
    INFER_TRY(Tokenizer tok, Tokenizer::load(tok_path));
    tokenizer_mb_s = measure_encode_mb_per_s(tok, size_t(1) << 20);
    if (!opts.tools_root.empty()) {
      INFER_TRY(tools, bench_tools(backend, ids, tok, opts));
    }
  } else if (!opts.tools_root.empty()) {
    return make_error(ErrorCode::kNotFound, tok_path.string() + " does not exist (--bench "
                                            "--tools parses calls by the tokenizer's markers)");
  }

  // The bound decode is measured against: host memory read by all threads on the CPU, device
  // memory read by a compute shader on the GPU (the copy figure goes beside it).
  Bandwidth bw;
  gpu::CopyBandwidth copy;
  if (backend.gpu != nullptr) {
    // A CPU device (lavapipe) reads host memory: 256 MiB is past its caches, and slow enough.
    const bool cpu_device = backend.ctx->info().type == VK_PHYSICAL_DEVICE_TYPE_CPU;
    const size_t bytes = cpu_device ? size_t(256) << 20 : size_t(1) << 30;
    INFER_TRY(copy, gpu::measure_copy_bandwidth(*backend.ctx, bytes));
    INFER_TRY(gpu::ReadBandwidth read, gpu::measure_device_read_bandwidth(
                                           *backend.ctx, bytes, /*passes=*/5,
                                           /*sweeps=*/cpu_device ? 1 : 8));
    bw.best_gb_per_s = read.best_gb_per_s;
    bw.median_gb_per_s = read.median_gb_per_s;
    bw.buffer_bytes = read.buffer_bytes;
    bw.passes_gb_per_s = read.passes_gb_per_s;
  } else {
    bw = measure_read_bandwidth(pool);
  }
  const size_t bytes_per_token = model->decode_bytes_per_token();
  const double fraction = decode_tok_s * double(bytes_per_token) / (bw.best_gb_per_s * 1e9);

  const ModelWeights& w = model->weights();
  const Matrix& proj = w.layers.empty() ? w.lm_head : w.layers[0].q_proj;
  nlohmann::ordered_json j = {
      {"model_dir", choice.dir.string()},
      {"demo_model", choice.demo},
      {"quant", quant_name(opts.quant)},
      {"weight_format", weight_format_name(proj.format)},
      {"head_format", weight_format_name(w.lm_head.format)},
      {"threads", threads},
      {"isa", matmul_isa()},
      {"load_s", load_s},
      {"prefill_tokens", T},
      {"prefill_warmup_s", prefill_warmup_s},
      {"prefill_runs_s", prefill_s},
      {"prefill_tokens_per_s", prefill_tok_s},
      {"decode_tokens", kBenchDecodeTokens},
      {"decode_tokens_per_s", decode_tok_s},
      {"decode_ms_per_token_median", median(step_ms)},
      {"decode_bytes_per_token", bytes_per_token},
      {"memory_bandwidth_gb_per_s", bw.best_gb_per_s},
      {"memory_bandwidth_gb_per_s_median", bw.median_gb_per_s},
      {"memory_bandwidth_buffer_bytes", bw.buffer_bytes},
      {"decode_bandwidth_fraction", fraction},
      {"peak_rss_bytes", rss},
      {"tokenizer_encode_mb_per_s", tokenizer_mb_s},
  };
  if (backend.gpu != nullptr) {
    add_gpu_fields(*backend.ctx, model->config(), *backend.gpu, backend_s, host_ms, submit_ms,
                   wait_ms, copy, j);
  }
  if (!profile.is_null()) j["gpu_profile"] = profile;
  if (!tools.is_null()) j["tools"] = tools;
  INFER_TRY_VOID(write_bench_json(opts, j));

  std::fprintf(stderr,
               "bench: %s (%s weights, %s head), %d threads, %s kernels\n"
               "  load      %.3f s\n"
               "  prefill   %lld tokens, %.1f tokens/s (median of %zu)\n"
               "  decode    %d tokens, %.2f tokens/s, %.3f ms/token median\n"
               "  bandwidth %.1f GB/s best, %.1f median; decode reads %.1f MB/token = %.1f%% of "
               "the bound\n"
               "  peak RSS  %.1f MB\n",
               choice.dir.string().c_str(), weight_format_name(proj.format),
               weight_format_name(w.lm_head.format), threads, matmul_isa(), load_s,
               static_cast<long long>(T), prefill_tok_s, prefill_s.size(), kBenchDecodeTokens,
               decode_tok_s, median(step_ms), bw.best_gb_per_s, bw.median_gb_per_s,
               double(bytes_per_token) / 1e6, fraction * 100.0, double(rss) / 1e6);
  if (!tokenizer_mb_s.is_null()) {
    std::fprintf(stderr, "  tokenizer %.1f MB/s encode\n", tokenizer_mb_s.get<double>());
  }
  if (backend.gpu != nullptr) {
    const gpu::RecordingCounts counts = backend.gpu->decode_counts();
    std::fprintf(stderr,
                 "  gpu       %s, %.1f MB on the device, upload %.3f s; bandwidth is the device's "
                 "read (copy: %.1f GB/s read + written)\n"
                 "  per token host %.3f ms, submit %.3f ms, wait %.3f ms (medians); %d dispatches, "
                 "%d barriers (%d buffer barriers)\n",
                 backend.ctx->info().name.c_str(), double(backend.gpu->device_bytes()) / 1e6,
                 backend_s, copy.best_gb_per_s, median(host_ms), median(submit_ms),
                 median(wait_ms), counts.dispatches, counts.barrier_commands,
                 counts.buffer_barriers);
  }
  return Ok{};
}

}  // namespace infer::cli
