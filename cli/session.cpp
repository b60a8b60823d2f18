// Session setup for the actor front ends: the same loading as one-shot generation
// (cli/generate.cpp), with the forward pass shared into the pipeline.
#include "cli/session.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "cli/backend.h"
#include "cli/gpu_trace.h"
#include "cli/memory_check.h"
#include "memory/episodic_memory.h"

namespace infer::cli {

std::vector<int32_t> end_of_turn_ids(const TextConfig& text, const GenerationConfig& gen,
                                     const Tokenizer* tok) {
  std::vector<int32_t> ids = gen.eos_token_id.empty() ? text.eos_token_id : gen.eos_token_id;
  ids.insert(ids.end(), text.eos_token_id.begin(), text.eos_token_id.end());
  if (tok != nullptr) {
    if (auto id = tok->token_to_id("<turn|>")) ids.push_back(*id);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

// --memory [PATH]: the episodic store, when the ring runs (the fixed cache evicts nothing and
// has no recall tier). Null without --memory or with --no-memory.
Result<std::shared_ptr<actors::MemoryLink>> open_memory(const Options& opts, const Session& s,
                                                        const std::optional<RingConfig>& ring) {
  if (!opts.memory || opts.no_memory) return std::shared_ptr<actors::MemoryLink>();
  if (!ring) {
    return make_error(ErrorCode::kInvalidArgument,
                      "--memory needs the KV ring (it stores what leaves the window and recalls "
                      "into the ring's recall tier): drop --no-ring");
  }
  memory::MemoryOptions mo;
  mo.path = opts.memory->string();
  if (opts.mem_capacity) mo.capacity = uint32_t(*opts.mem_capacity);
  if (opts.episode_tokens) mo.episode_tokens = uint32_t(*opts.episode_tokens);
  mo.recall_tokens = uint32_t(ring->recall);
  mo.recall_threads = s.pool ? s.pool->size() : 1;  // the forward's threads wait for the recall
  const Tokenizer* tok = s.tokenizer ? &*s.tokenizer : nullptr;
  memory::Detokenize detok = [tok](std::span<const int32_t> ids) {
    return tok != nullptr ? tok->decode(ids) : std::string();
  };
  auto link = std::make_shared<actors::MemoryLink>();
  INFER_TRY(link->memory, memory::EpisodicMemory::open(s.model->config(), mo, std::move(detok)));
  link->recall_tokens = ring->recall;
  link->episode_tokens = mo.episode_tokens;
  for (const std::string& problem : link->memory->store().problems()) {
    std::fprintf(stderr, "infer: memory: %s\n", problem.c_str());
  }
  return link;
}

Result<std::unique_ptr<Session>> open_session(const Options& opts, bool need_tokenizer) {
  auto s = std::make_unique<Session>();
  INFER_TRY(s->choice, choose_model(opts));
  if (!opts.trace_file.empty()) {  // opened first: a path that cannot be written fails fast
    INFER_TRY(s->trace, actors::ChromeTrace::open(opts.trace_file));
  }
  INFER_TRY(std::unique_ptr<gpu::VulkanContext> gpu_ctx, open_gpu(opts));
  INFER_TRY(LoadedModel loaded, load_model_sized(s->choice, opts));
  s->model = std::move(loaded.model);
  s->pool = std::move(loaded.pool);
  s->threads = loaded.threads;
  INFER_TRY(GenerationConfig gen, load_generation_config(s->choice.dir));
  const auto tok_path = s->choice.dir / "tokenizer.json";
  if (std::filesystem::exists(tok_path)) {
    INFER_TRY(s->tokenizer, Tokenizer::load(tok_path));
  } else if (need_tokenizer) {
    return make_error(ErrorCode::kNotFound,
                      tok_path.string() + " does not exist (the interactive session and --system read text)");
  }
  const TextConfig& text = s->model->config().text;
  if (s->tokenizer) INFER_TRY_VOID(s->tokenizer->check_fits(text.vocab_size, tok_path.string()));
  const int64_t max_positions = std::min(text.max_position_embeddings, kSessionContext);
  INFER_TRY(const std::optional<RingConfig> ring, ring_config(opts));
  INFER_TRY_VOID(check_context_memory(s->model->config(), ring, max_positions, gpu_ctx.get()));
  INFER_TRY(Backend backend,
            make_backend(std::move(gpu_ctx), *s->model, *s->pool, max_positions, ring));
  s->ring = ring.has_value();
  s->context_tokens = ring ? ring->anchors + ring->window + ring->recall : max_positions;
  s->stream_capacity = ring ? ring->anchors + ring->window : max_positions;
  INFER_TRY_VOID(apply_quiescence(opts, backend));
  s->backend_name = backend.name;
  auto held = std::make_shared<Backend>(std::move(backend));
  s->forward = std::shared_ptr<Forward>(held, held->forward.get());
  if (s->trace && held->gpu != nullptr) {
    s->forward = std::make_shared<GpuTracedForward>(s->forward, held->gpu, s->trace.get());
  }

  actors::PipelineOptions& p = s->pipeline;
  p.engine.sampling = resolve_sampling(opts, gen);
  p.engine.end_ids = end_of_turn_ids(text, gen, s->tokenizer ? &*s->tokenizer : nullptr);
  p.engine.max_positions = ring ? kEndlessPositions : max_positions;
  p.gate.max_entropy = opts.gate_entropy;
  p.gate.min_top_prob = opts.gate_top_prob;
  p.gate.end_prob = opts.gate_end_prob;
  p.gate.yield_to_input = opts.gate_yield;
  if (opts.consolidate_after_s) p.consolidate_after_s = *opts.consolidate_after_s;
  p.tokenizer = s->tokenizer ? &*s->tokenizer : nullptr;
  p.tracer = s->trace.get();
  INFER_TRY(p.memory, open_memory(opts, *s, ring));
  // Once everything is open: an error before it stays stderr's only line.
  if (held->gpu == nullptr) std::fprintf(stderr, "%s\n", s->threads.report.c_str());
  return s;
}

}  // namespace infer::cli
