// Generation from the command line: load, then one Engine turn that prefills (dumping prompt
// logits when asked) and one that generates, streaming each token to stdout as it comes and
// stopping at the end ids or -n tokens, on the CPU or (--gpu) the Vulkan backend. Load, prefill
// and decode timings go to stderr.
#include "cli/generate.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
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

#include "actors/control.h"
#include "actors/engine.h"
#include "actors/tool_registry.h"
#include "base/clock.h"
#include "cli/backend.h"
#include "cli/chat_turn.h"
#include "cli/memory_check.h"
#include "cli/model_choice.h"
#include "cli/one_shot_tools.h"
#include "cli/session.h"
#include "model/config.h"
#include "model/model.h"
#include "model/sampling.h"
#include "model/thread_pool.h"
#include "model/tokenizer/tokenizer.h"

namespace infer::cli {
namespace {

using Clock = SteadyClock;

// Ctrl-C stops the generation at the next token (or prefill chunk); what was generated and the
// timings are still printed, and the exit status is 130 as for any SIGINT.
actors::Control g_interrupt;
extern "C" void on_sigint_one_shot(int) { g_interrupt.interrupt_epoch.fetch_add(1); }

Result<Tokenizer> load_tokenizer(const std::filesystem::path& dir, const char* why) {
  const auto path = dir / "tokenizer.json";
  if (!std::filesystem::exists(path)) {
    return make_error(ErrorCode::kNotFound, path.string() + " does not exist (" + why + ")");
  }
  return Tokenizer::load(path);
}

// --chat: the prompt as the first user turn, after --system's turn (which declares the tools
// with --tools).
ChatTurnSpec chat_spec(const Options& opts) {
  static const std::vector<ToolDeclaration> kBuiltin = actors::builtin_declarations();
  ChatTurnSpec spec;
  if (opts.system_prompt) spec.system = *opts.system_prompt;
  spec.special = opts.special;
  if (!opts.tools_root.empty()) spec.tools = kBuiltin;
  return spec;
}

// Writes each generated token to stdout as soon as it is known: decoded text (UTF-8 held back
// until complete) or space-separated ids.
class TokenPrinter : public actors::TokenSink {
 public:
  TokenPrinter(OutputMode mode, const Tokenizer* tok) : mode_(mode) {
    if (mode_ == OutputMode::kText) decoder_.emplace(*tok);
  }
  actors::Verdict token(const actors::Step& s) override {
    push(s.id);
    return actors::Verdict::kKeep;
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
  // Ends the output: the rest of a partial character, then a newline, so that the timing lines
  // on stderr never run into the text when both go to one terminal or file.
  void finish() {
    text_.clear();
    if (decoder_) decoder_->flush(text_);
    text_ += "\n";
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

// Appends every prompt position's logits [n, V] to the dump file as the engine prefills.
class LogitsDump {
 public:
  static_assert(std::endian::native == std::endian::little, "the dump is little-endian float32");
  Result<void> open(const std::filesystem::path& path) {
    path_ = path;
    out_.open(path, std::ios::binary | std::ios::trunc);
    if (!out_) return make_error(ErrorCode::kIo, path.string() + ": cannot open for writing");
    return Ok{};
  }
  Result<void> write(std::span<const float> logits) {
    out_.write(reinterpret_cast<const char*>(logits.data()),
               std::streamsize(logits.size() * sizeof(float)));
    if (!out_) return make_error(ErrorCode::kIo, path_.string() + ": write failed");
    return Ok{};
  }

 private:
  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace

Result<void> run_tokenize(const Options& opts) {
  INFER_TRY(ModelChoice choice, choose_model(opts));
  INFER_TRY(Tokenizer tok, load_tokenizer(choice.dir, "--tokenize needs it"));
  const std::vector<int32_t> ids =
      opts.chat ? chat_turn_ids(tok, *opts.prompt, chat_spec(opts)) : tok.encode(*opts.prompt, true);
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) line += ' ';
    line += std::to_string(ids[i]);
  }
  std::printf("%s\n", line.c_str());
  return Ok{};
}

Result<int> run_generate(const Options& opts) {
  INFER_TRY(ModelChoice choice, choose_model(opts));
  INFER_TRY(std::unique_ptr<gpu::VulkanContext> gpu_ctx, open_gpu(opts));

  const auto t_load = Clock::now();
  INFER_TRY(LoadedModel loaded, load_model_sized(choice, opts));
  const std::unique_ptr<Model> model = std::move(loaded.model);
  ThreadPool& pool = *loaded.pool;
  const int threads = loaded.threads.threads;
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
  if (tok) INFER_TRY_VOID(tok->check_fits(V, (choice.dir / "tokenizer.json").string()));
  INFER_TRY(const std::shared_ptr<const tools::BuiltinTools> tools,
            open_tools(opts, tok ? &*tok : nullptr));
  // --chat: one user turn, the prompt as plain text. Otherwise the prompt as raw text (markers
  // it spells become control tokens) or the ids as given.
  std::vector<int32_t> ids;
  if (opts.chat) {
    ids = chat_turn_ids(*tok, *opts.prompt, chat_spec(opts));
  } else if (opts.prompt_ids) {
    ids = *opts.prompt_ids;
  } else {
    ids = tok->encode(*opts.prompt, true);
  }
  for (int32_t id : ids) {
    if (id >= V) {
      return make_error(ErrorCode::kInvalidArgument, "prompt id " + std::to_string(id) +
                                                         " is outside the vocabulary (" +
                                                         std::to_string(V) + " tokens)");
    }
  }
  const int64_t T = int64_t(ids.size());
  // With the KV ring the stream has no end: positions are assigned inside the cache.
  INFER_TRY(const std::optional<RingConfig> ring,
            ring_config(with_tool_anchors(opts, tok ? &*tok : nullptr)));
  if (tools) INFER_TRY_VOID(check_tool_anchors(opts, *tok, ring));
  if (!ring && T > text.max_position_embeddings) {
    return make_error(ErrorCode::kInvalidArgument,
                      "the prompt has " + std::to_string(T) + " tokens, the model takes " +
                          std::to_string(text.max_position_embeddings));
  }
  // The forward takes T + max_tokens - 1 positions (the last token is never fed back); one spare
  // costs nothing. The engine's context holds one more id than the forward: the last token,
  // which is never fed. With the ring only the token limit ends the stream.
  const int64_t max_tokens = std::min<int64_t>(opts.max_tokens, 1 << 30);
  // Tool responses join the context besides the generated tokens: room for a session's worth.
  const int64_t max_positions =
      std::min(text.max_position_embeddings,
               tools ? std::max(T + max_tokens, kSessionContext) : T + max_tokens);

  const SamplingParams params = resolve_sampling(opts, gen);
  INFER_TRY_VOID(check_context_memory(model->config(), ring, max_positions, gpu_ctx.get()));
  const auto t_backend = Clock::now();
  INFER_TRY(Backend backend,
            make_backend(std::move(gpu_ctx), *model, pool, max_positions, ring));
  INFER_TRY_VOID(apply_quiescence(opts, backend));
  const double backend_s = seconds_since(t_backend);

  // Said before the generation starts, not after it: a long load is seen when it happens.
  const ModelWeights& w = model->weights();
  const Matrix& proj = w.layers.empty() ? w.lm_head : w.layers[0].q_proj;
  if (backend.gpu == nullptr) std::fprintf(stderr, "%s\n", loaded.threads.report.c_str());
  std::fprintf(stderr, "load: %.3f s (%s, %s weights, %s head, %d thread%s)\n", load_s,
               choice.dir.string().c_str(), weight_format_name(proj.format),
               weight_format_name(w.lm_head.format), threads, threads == 1 ? "" : "s");
  if (backend.gpu != nullptr) {
    std::fprintf(stderr, "gpu: upload and recording %.3f s, %.1f MB on the device\n", backend_s,
                 double(backend.gpu->device_bytes()) / 1e6);
  }

  actors::EngineOptions eo;
  eo.sampling = params;
  eo.end_ids = end_of_turn_ids(text, gen, tok ? &*tok : nullptr);
  eo.max_positions = (ring ? (tools ? kEndlessPositions : T + max_tokens) : max_positions) + 1;
  eo.prefill_chunk = std::max<int64_t>(T, 1);  // the prompt in one call
  LogitsDump dump;
  if (!opts.dump_logits.empty()) {
    INFER_TRY_VOID(dump.open(opts.dump_logits));
    eo.prefill_chunk = 64;
    eo.prompt_logits = [&dump](std::span<const float> logits, int64_t) {
      return dump.write(logits);
    };
  } else {
    eo.prefill_chunk = std::min<int64_t>(eo.prefill_chunk, 512);  // Ctrl-C is seen between chunks
  }
  // Greedy on the GPU takes the argmax there: only the id comes back, not V logits.
  if (gpu::GpuForward* g = backend.gpu; g != nullptr && params.temperature <= 0) {
    eo.decode_argmax = [g](int32_t id) { return g->decode_greedy(id); };
  }
  // The engine shares the forward; the backend here outlives it.
  actors::Engine engine(std::shared_ptr<Forward>(std::shared_ptr<void>(), backend.forward.get()),
                        std::move(eo));

  struct sigaction sa{};
  sa.sa_handler = on_sigint_one_shot;
  sigemptyset(&sa.sa_mask);
  struct sigaction previous{};
  sigaction(SIGINT, &sa, &previous);
  const actors::TurnControl control{.control = &g_interrupt,
                                    .epoch = g_interrupt.interrupt_epoch.load()};

  TokenPrinter printer(opts.output, tok ? &*tok : nullptr);
  actors::TurnRequest prompt;
  prompt.input = ids;
  prompt.control = control;
  const auto t_prefill = Clock::now();
  const actors::TurnOutcome prefilled = engine.run_turn(prompt, printer);
  if (prefilled.error) return *prefilled.error;
  const double prefill_s = seconds_since(t_prefill);

  actors::TurnOutcome out = prefilled;
  double decode_s = 0.0;
  if (prefilled.reason != actors::StopReason::kInterrupted) {
    actors::TurnRequest turn;
    turn.max_tokens = max_tokens;
    turn.control = control;
    const auto t_decode = Clock::now();
    if (tools) {  // the model's calls run, their responses join this turn
      INFER_TRY(const ToolTokens markers, ToolTokens::from(*tok));
      actors::ToolLoop loop({&*tok, markers, opts.tool_steps.value_or(actors::kDefaultToolSteps),
                             true});
      OneShotToolSink sink(printer, *tools, opts.output == OutputMode::kIds);
      out = loop.run_turn(engine, turn, 1, sink);
    } else {
      out = engine.run_turn(turn, printer);
    }
    if (out.error) return *out.error;
    decode_s = seconds_since(t_decode);
  }
  sigaction(SIGINT, &previous, nullptr);
  printer.finish();
  const int64_t generated = out.generated, decoded = engine.decoded();
  const bool interrupted = out.reason == actors::StopReason::kInterrupted;
  const char* stopped_by = interrupted ? "Ctrl-C"
                           : out.reason == actors::StopReason::kEndToken ? "an end token"
                           : out.reason == actors::StopReason::kContextFull
                               ? "the model's context length"
                               : "the token limit";

  const int64_t fed = interrupted && decode_s == 0.0 ? engine.fed() : T;
  std::fprintf(stderr, "prefill: %lld tokens in %.3f s, %.1f tokens/s\n", static_cast<long long>(fed),
               prefill_s, prefill_s > 0 ? double(fed) / prefill_s : 0.0);
  std::fprintf(
      stderr, "decode: %lld tokens in %.3f s, %.1f tokens/s (%lld generated, stopped by %s)\n",
      static_cast<long long>(decoded), decode_s, decode_s > 0 ? double(decoded) / decode_s : 0.0,
      static_cast<long long>(generated), stopped_by);
  if (params.temperature > 0) {
    std::fprintf(stderr, "sampling: temperature %g, top-k %d, top-p %g, min-p %g, seed %llu\n",
                 double(params.temperature), params.top_k, double(params.top_p),
                 double(params.min_p), static_cast<unsigned long long>(params.seed));
  }
  if (params.repeat_penalty != 1.0f && params.repeat_last_n > 0) {
    std::fprintf(stderr, "repeat penalty: %g over the last %d ids\n", double(params.repeat_penalty),
                 params.repeat_last_n);
  }
  return interrupted ? 130 : 0;
}

}  // namespace infer::cli
