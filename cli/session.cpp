// Session setup for the actor front ends: the same loading as one-shot generation
// (cli/generate.cpp), with the forward pass shared into the pipeline.
#include "cli/session.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "actors/tool_registry.h"
#include "cli/backend.h"
#include "cli/chat_turn.h"
#include "cli/gpu_trace.h"
#include "cli/memory_check.h"
#include "memory/episodic_memory.h"
#include "model/tool_format/tool_tokens.h"
#include "tools_vfs/builtin_tools.h"

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

int64_t system_turn_tokens(const Options& opts, const Tokenizer& tok) {
  const std::vector<ToolDeclaration> tools = actors::builtin_declarations();
  return int64_t(
      system_turn_ids(tok, opts.system_prompt.value_or(""), opts.special, tools).size());
}

Options with_tool_anchors(const Options& opts, const Tokenizer* tok) {
  Options o = opts;
  if (opts.tools_root.empty() || tok == nullptr || opts.anchors || opts.no_ring) return o;
  if (!ToolTokens::from(*tok)) return o;  // open_tools refuses it with the reason
  const int64_t n = system_turn_tokens(opts, *tok) + (opts.serve ? kClientToolTokens : 0);
  o.anchors = int(std::max<int64_t>(RingConfig{}.anchors, n));
  return o;
}

Result<void> check_tool_anchors(const Options& opts, const Tokenizer& tok,
                                const std::optional<RingConfig>& ring) {
  if (!ring || opts.tools_root.empty()) return Ok{};
  const int64_t n = system_turn_tokens(opts, tok);
  if (n <= int64_t(ring->anchors)) return Ok{};
  return make_error(ErrorCode::kInvalidArgument,
                    "--anchors " + std::to_string(ring->anchors) +
                        " cannot hold the system turn that declares the tools (" +
                        std::to_string(n) +
                        " tokens): eviction would drop declarations; give more --anchors or "
                        "leave it out (it then grows to fit)");
}

Result<std::shared_ptr<const tools::BuiltinTools>> open_tools(const Options& opts,
                                                              const Tokenizer* tok) {
  if (opts.tools_root.empty()) return std::shared_ptr<const tools::BuiltinTools>();
  if (tok == nullptr) {
    return make_error(ErrorCode::kInvalidArgument, "--tools needs the model's tokenizer.json");
  }
  if (Result<ToolTokens> t = ToolTokens::from(*tok); !t) {
    return make_error(ErrorCode::kInvalidArgument, "--tools: the model's " + t.error().message);
  }
  INFER_TRY(std::unique_ptr<tools::BuiltinTools> t,
            tools::BuiltinTools::open(opts.tools_root.string(), [tok](std::string_view text) {
              return tok->encode(text, false, SpecialText::kAsText).size();
            }));
  return std::shared_ptr<const tools::BuiltinTools>(std::move(t));
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
  const Tokenizer* tok = s->tokenizer ? &*s->tokenizer : nullptr;
  INFER_TRY(const std::optional<RingConfig> ring, ring_config(with_tool_anchors(opts, tok)));
  INFER_TRY_VOID(check_context_memory(s->model->config(), ring, max_positions, gpu_ctx.get()));
  INFER_TRY(Backend backend,
            make_backend(std::move(gpu_ctx), *s->model, *s->pool, max_positions, ring));
  s->ring = ring.has_value();
  s->anchors = ring ? ring->anchors : 0;
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
  p.gate.act_on_interrupts = opts.gate_interrupts;
  if (opts.consolidate_after_s) p.consolidate_after_s = *opts.consolidate_after_s;
  p.tokenizer = s->tokenizer ? &*s->tokenizer : nullptr;
  p.tracer = s->trace.get();
  INFER_TRY(p.memory, open_memory(opts, *s, ring));
  INFER_TRY(p.tools.builtin, open_tools(opts, p.tokenizer));
  if (p.tools.builtin) INFER_TRY_VOID(check_tool_anchors(opts, *s->tokenizer, ring));
  // --serve opens every context with EngineOptions::preamble: with --tools it is the system turn
  // declaring them (cli/serve.cpp replaces it when --system is given; that one must pass the
  // declarations too).
  if (p.tools.builtin && opts.serve && !opts.system_prompt) {
    const std::vector<ToolDeclaration> tools = actors::builtin_declarations();
    p.engine.preamble = system_turn_ids(*s->tokenizer, "", opts.special, tools);
  }
  if (opts.tool_steps) p.tools.max_steps = *opts.tool_steps;
  // Once everything is open: an error before it stays stderr's only line.
  if (held->gpu == nullptr) std::fprintf(stderr, "%s\n", s->threads.report.c_str());
  return s;
}

}  // namespace infer::cli
