// Generation from the command line: load, prefill (dumping prompt logits when asked), then the
// decode loop, which samples, streams each token to stdout as it comes and stops at <eos>,
// <turn|> or -n tokens, on the CPU or (--gpu) the Vulkan backend, both through Forward. Load,
// prefill and decode timings go to stderr.
#include "cli/generate.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "cli/backend.h"
#include "cli/model_choice.h"
#include "model/config.h"
#include "model/model.h"
#include "model/sampling.h"
#include "model/thread_pool.h"
#include "model/tokenizer/tokenizer.h"

namespace infer::cli {
namespace {

using Clock = SteadyClock;

Result<Tokenizer> load_tokenizer(const std::filesystem::path& dir, const char* why) {
  const auto path = dir / "tokenizer.json";
  if (!std::filesystem::exists(path)) {
    return make_error(ErrorCode::kNotFound, path.string() + " does not exist (" + why + ")");
  }
  return Tokenizer::load(path);
}

// Writes each generated token to stdout as soon as it is known: decoded text (UTF-8 held back
// until complete) or space-separated ids.
class TokenPrinter {
 public:
  TokenPrinter(OutputMode mode, const Tokenizer* tok) : mode_(mode) {
    if (mode_ == OutputMode::kText) decoder_.emplace(*tok);
  }
  void push(int32_t id) {
    text_.clear();
    if (mode_ == OutputMode::kIds) {
      if (count_ > 0) text_ += ' ';
      text_ += std::to_string(id);
    } else {
      decoder_->push(id, text_);
    }
    ++count_;
    write();
  }
  // Ends the output: the rest of a partial character, and a newline after ids (or on a terminal).
  void finish() {
    text_.clear();
    if (decoder_) decoder_->flush(text_);
    if (mode_ == OutputMode::kIds || isatty(STDOUT_FILENO)) text_ += "\n";
    write();
  }

 private:
  void write() {
    if (!text_.empty()) std::fwrite(text_.data(), 1, text_.size(), stdout);
    std::fflush(stdout);
  }
  OutputMode mode_;
  std::optional<StreamDecoder> decoder_;
  std::string text_;
  int64_t count_ = 0;
};

// Prefills the prompt; with a dump file, in chunks whose logits [chunk, V] are appended to it.
Result<void> prefill(Forward& fwd, const std::vector<int32_t>& ids, int64_t V,
                     const std::filesystem::path& dump, std::vector<float>& logits) {
  if (dump.empty()) return fwd.prefill(ids, logits.data());
  static_assert(std::endian::native == std::endian::little, "the dump is little-endian float32");
  std::ofstream out(dump, std::ios::binary | std::ios::trunc);
  if (!out) return make_error(ErrorCode::kIo, dump.string() + ": cannot open for writing");
  constexpr size_t kChunk = 64;
  std::vector<float> chunk_logits(kChunk * size_t(V));
  size_t n = 0;
  for (size_t b = 0; b < ids.size(); b += kChunk) {
    n = std::min(kChunk, ids.size() - b);
    INFER_TRY_VOID(fwd.prefill(std::span(ids).subspan(b, n), chunk_logits.data(), true));
    out.write(reinterpret_cast<const char*>(chunk_logits.data()),
              std::streamsize(n * size_t(V) * sizeof(float)));
    if (!out) return make_error(ErrorCode::kIo, dump.string() + ": write failed");
  }
  std::copy_n(chunk_logits.begin() + ptrdiff_t((n - 1) * size_t(V)), V, logits.begin());
  return Ok{};
}

}  // namespace

Result<void> run_tokenize(const Options& opts) {
  INFER_TRY(ModelChoice choice, choose_model(opts));
  INFER_TRY(Tokenizer tok, load_tokenizer(choice.dir, "--tokenize needs it"));
  const std::vector<int32_t> ids = tok.encode(*opts.prompt, true);
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) line += ' ';
    line += std::to_string(ids[i]);
  }
  std::printf("%s\n", line.c_str());
  return Ok{};
}

Result<void> run_generate(const Options& opts) {
  INFER_TRY(ModelChoice choice, choose_model(opts));
  const int threads = thread_count(opts);
  ThreadPool pool(threads);
  INFER_TRY(std::unique_ptr<gpu::VulkanContext> gpu_ctx, open_gpu(opts));

  const auto t_load = Clock::now();
  INFER_TRY(std::unique_ptr<Model> model, load_model(choice, LoadOptions{opts.quant}, pool));
  INFER_TRY(GenerationConfig gen, load_generation_config(choice.dir));
  const bool need_tokenizer =
      opts.prompt || (opts.output == OutputMode::kText && opts.max_tokens > 0);
  std::optional<Tokenizer> tok;
  if (need_tokenizer) {
    INFER_TRY(tok, load_tokenizer(choice.dir, "use --prompt-ids and --output ids without one"));
  } else if (std::filesystem::exists(choice.dir / "tokenizer.json")) {
    INFER_TRY(tok, Tokenizer::load(choice.dir / "tokenizer.json"));  // for the <turn|> id
  }
  const double load_s = seconds_since(t_load);

  const TextConfig& text = model->config().text;
  const int64_t V = text.vocab_size;
  std::vector<int32_t> ids = opts.prompt_ids ? *opts.prompt_ids : tok->encode(*opts.prompt, true);
  for (int32_t id : ids) {
    if (id >= V) {
      return make_error(ErrorCode::kInvalidArgument, "prompt id " + std::to_string(id) +
                                                         " is outside the vocabulary (" +
                                                         std::to_string(V) + " tokens)");
    }
  }
  const int64_t T = int64_t(ids.size());
  // With the KV ring the stream has no end: positions are assigned inside the cache.
  INFER_TRY(const std::optional<RingConfig> ring, ring_config(opts));
  if (!ring && T > text.max_position_embeddings) {
    return make_error(ErrorCode::kInvalidArgument,
                      "the prompt has " + std::to_string(T) + " tokens, the model takes " +
                          std::to_string(text.max_position_embeddings));
  }
  // T + max_tokens - 1 would do (the last token is never fed back); one spare costs nothing.
  const int64_t max_positions =
      std::min(text.max_position_embeddings, T + std::min<int64_t>(opts.max_tokens, 1 << 30));

  std::vector<int32_t> stop_ids = gen.eos_token_id.empty() ? text.eos_token_id : gen.eos_token_id;
  for (int id : text.eos_token_id) stop_ids.push_back(id);
  if (tok) {
    if (auto turn_end = tok->token_to_id("<turn|>")) stop_ids.push_back(*turn_end);
  }
  const auto is_stop = [&](int32_t id) {
    return std::find(stop_ids.begin(), stop_ids.end(), id) != stop_ids.end();
  };

  const SamplingParams params = resolve_sampling(opts, gen);
  Sampler sampler(V, params);
  const auto t_backend = Clock::now();
  INFER_TRY(Backend backend,
            make_backend(std::move(gpu_ctx), *model, pool, max_positions, ring));
  INFER_TRY_VOID(apply_quiescence(opts, backend));
  const double backend_s = seconds_since(t_backend);
  Forward& fwd = *backend.forward;
  // Greedy on the GPU takes the argmax there: only the id comes back, not V logits.
  gpu::GpuForward* const greedy_on_gpu = params.temperature > 0 ? nullptr : backend.gpu;
  std::vector<float> logits(static_cast<size_t>(V));

  const auto t_prefill = Clock::now();
  INFER_TRY_VOID(prefill(fwd, ids, V, opts.dump_logits, logits));
  const double prefill_s = seconds_since(t_prefill);

  TokenPrinter printer(opts.output, tok ? &*tok : nullptr);
  const auto t_decode = Clock::now();
  int64_t generated = 0;
  int64_t decoded = 0;
  const char* stopped_by = "the token limit";
  if (opts.max_tokens > 0) {
    int32_t next = sampler.sample(logits);
    while (true) {
      if (is_stop(next)) {
        stopped_by = "an end token";
        break;
      }
      printer.push(next);
      if (++generated == opts.max_tokens) break;
      if (!ring && fwd.position() >= max_positions) {
        stopped_by = "the model's context length";
        break;
      }
      if (greedy_on_gpu != nullptr) {
        INFER_TRY(next, greedy_on_gpu->decode_greedy(next));
      } else {
        INFER_TRY_VOID(fwd.decode(next, logits.data()));
        next = sampler.sample(logits);
      }
      ++decoded;
    }
  }
  const double decode_s = seconds_since(t_decode);
  printer.finish();

  const ModelWeights& w = model->weights();
  const Matrix& proj = w.layers.empty() ? w.lm_head : w.layers[0].q_proj;
  std::fprintf(stderr, "load: %.3f s (%s, %s weights, %s head, %d threads)\n", load_s,
               choice.dir.string().c_str(), weight_format_name(proj.format),
               weight_format_name(w.lm_head.format), threads);
  if (backend.gpu != nullptr) {
    std::fprintf(stderr, "gpu: upload and recording %.3f s, %.1f MB on the device\n", backend_s,
                 double(backend.gpu->device_bytes()) / 1e6);
  }
  std::fprintf(stderr, "prefill: %lld tokens in %.3f s, %.1f tokens/s\n", static_cast<long long>(T),
               prefill_s, prefill_s > 0 ? double(T) / prefill_s : 0.0);
  std::fprintf(
      stderr, "decode: %lld tokens in %.3f s, %.1f tokens/s (%lld generated, stopped by %s)\n",
      static_cast<long long>(decoded), decode_s, decode_s > 0 ? double(decoded) / decode_s : 0.0,
      static_cast<long long>(generated), stopped_by);
  if (params.temperature > 0) {
    std::fprintf(stderr, "sampling: temperature %g, top-k %d, top-p %g, seed %llu\n",
                 double(params.temperature), params.top_k, double(params.top_p),
                 static_cast<unsigned long long>(params.seed));
  }
  return Ok{};
}

}  // namespace infer::cli
