// What an actor-pipeline session needs from the command line: the model, its tokenizer, the
// forward pass (CPU or --gpu) and the pipeline options (sampling, end-of-turn ids, gate,
// consolidation). The REPL, the pipe mode, --bench-actors and the --serve front end open one.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "actors/chrome_trace.h"
#include "actors/pipeline.h"
#include "base/result.h"
#include "cli/model_choice.h"
#include "cli/options.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "model/tokenizer/tokenizer.h"
#include "tools_vfs/builtin_tools.h"

namespace infer::cli {

// The context a --no-ring session holds: the exact KV cache allocates every position up front,
// so not the model's full max_position_embeddings.
inline constexpr int64_t kSessionContext = 8192;
// With the ring a stream has no end; the engine's bound on it only keeps counts finite.
inline constexpr int64_t kEndlessPositions = int64_t(1) << 62;
// The most one request may generate through the ring (SERVER_HELLO max_generate_tokens).
inline constexpr int64_t kRingMaxGenerate = int64_t(1) << 30;

struct Session {
  ModelChoice choice;
  // --trace: declared before forward and pipeline, so it closes (writing the final ']') after
  // every user of it; the Pipeline built from `pipeline` must be gone before the Session.
  std::unique_ptr<actors::ChromeTrace> trace;
  std::unique_ptr<ThreadPool> pool;
  ThreadChoice threads;  // the pool's size and why (cli/threads.h)
  std::unique_ptr<Model> model;
  std::optional<Tokenizer> tokenizer;
  std::shared_ptr<Forward> forward;  // keeps its backend (and Vulkan context) alive
  std::string backend_name;
  // Tokens the KV cache holds: the ring's anchors + window + recall, or the fixed cache's size.
  int64_t context_tokens = 0;
  int64_t stream_capacity = 0;  // stream tokens it holds: the ring's anchors + window
  bool ring = false;
  int64_t anchors = 0;  // the ring's anchor tokens (0 without the ring)
  actors::PipelineOptions pipeline;  // tokenizer points into this Session
};

// <bos> and the system turn (--system's text and, with --tools, the built-in declarations): what
// the KV ring's anchors must hold so that no declaration is ever evicted.
int64_t system_turn_tokens(const Options& opts, const Tokenizer& tok);
// With --tools the system turn declares the built-in tools (about 750 tokens): the ring's
// anchors grow to hold <bos> and the whole system turn, so that eviction never drops a
// declaration (DESIGN.md §4: anchors are never evicted), and under --serve kClientToolTokens
// more for the tools a client declares (TOOL_DECLARE). An explicit --anchors is kept, and
// check_tool_anchors refuses it when it is smaller.
inline constexpr int64_t kClientToolTokens = 1024;
Options with_tool_anchors(const Options& opts, const Tokenizer* tok);
Result<void> check_tool_anchors(const Options& opts, const Tokenizer& tok,
                                const std::optional<RingConfig>& ring);
// --tools ROOT: the built-in tools, counting tokens with the model's tokenizer (the reader's
// token cap). Null without --tools; an error without a tokenizer that has the tool markers.
Result<std::shared_ptr<const tools::BuiltinTools>> open_tools(const Options& opts,
                                                              const Tokenizer* tok);

// Loads everything; a missing tokenizer.json is an error when need_tokenizer.
Result<std::unique_ptr<Session>> open_session(const Options& opts, bool need_tokenizer);

// The end-of-turn ids every generator stops at (GEMMA4_CHAT.md: a turn ends at <eos> 1 or
// <turn|> 106): generation_config's eos ids (else config.json's), config.json's, and <turn|>
// when the tokenizer has it. Sorted, no duplicates.
std::vector<int32_t> end_of_turn_ids(const TextConfig& text, const GenerationConfig& gen,
                                     const Tokenizer* tok);

}  // namespace infer::cli
