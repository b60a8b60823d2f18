// The infer command line: every switch parsed into one plain struct and validated, the --help
// text, and the sampling settings resolved against generation_config.json.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "gpu/tuning.h"
#include "model/config.h"
#include "model/kv_ring.h"
#include "model/model.h"
#include "model/sampling.h"

namespace infer::cli {

enum class OutputMode { kText, kIds };
using EvictPolicy = ::infer::EvictPolicy;  // model/kv_ring.h

struct Options {
  bool help = false;
  bool version = false;  // --version: "infer <version> (git <commit>)"

  // Model and what to feed it.
  std::filesystem::path model_dir;  // empty: ../gemma-4-E2B if present, else the demo model
  int64_t max_tokens = 256;
  std::optional<std::string> prompt;               // -p/--prompt TEXT or the positional argument
  // -f/--file FILE: the prompt is the file's text; read_prompt_file() moves it into `prompt`.
  std::optional<std::filesystem::path> prompt_file;
  std::optional<std::vector<int32_t>> prompt_ids;  // --prompt-ids 2,17,99
  OutputMode output = OutputMode::kText;
  std::filesystem::path dump_logits;  // empty: none
  bool tokenize = false;
  // Chat handling: --chat wraps a one-shot prompt in Gemma turns (the REPL always does);
  // --system TEXT opens the context with a system turn (REPL, --chat, --serve); --special lets
  // user text spell control tokens (<|turn>, <turn|>, ...), which otherwise stay plain text.
  bool chat = false;
  bool special = false;
  std::optional<std::string> system_prompt;

  // Sampling: unset values come from generation_config.json (resolve_sampling).
  std::optional<float> temperature;
  std::optional<int> top_k;
  std::optional<float> top_p;
  std::optional<uint64_t> seed;
  std::optional<float> min_p;           // --min-p: 0 = off
  std::optional<float> repeat_penalty;  // --repeat-penalty: 1 = off
  std::optional<int> repeat_last_n;     // --repeat-last-n: ids of the context looked at

  // Backend.
  int threads = 0;  // 0: from the model's size and the physical cores (cli/threads.h)
  bool force_threads = false;  // --force-threads: --threads may exceed the CPUs we may run on
  Quant quant = Quant::kAsStored;
  bool gpu = false;
  std::optional<int> device;
  gpu::TuningOverrides gpu_tune;         // --gpu-tune key=value,... (gpu/tuning.h's keys)
  std::optional<int64_t> prefill_chunk;  // --prefill-chunk: GPU tokens a prefill chunk

  // Modes.
  bool serve = false;
  bool bench = false;
  std::filesystem::path bench_file;  // empty: JSON to stdout
  bool bench_actors = false;         // --bench-actors: per-token hop cost of the pipeline
  bool profile = false;              // --bench --gpu: GPU time per command (timestamps)
  // --bench --bench-stream N: N decode steps timed, a point every --bench-every K tokens.
  std::optional<int64_t> bench_stream, bench_every;
  // --bench --bench-context N,...: decode speed after N tokens, ring vs exact (synthetic rows).
  std::optional<std::vector<int64_t>> bench_context;
  std::optional<int64_t> bench_memory;  // --bench-memory N: decode tokens per run, memory off/on
  std::optional<int64_t> bench_quiescence;  // --bench-quiescence N: decode tokens compared

  // KV ring (DESIGN.md §4), episodic memory (§5), quiescence (§6), gate (§3), trace, tools (§8).
  std::optional<int> anchors, window, recall;  // -c/--ctx-size sets window
  std::optional<EvictPolicy> evict;
  bool no_ring = false;  // --no-ring: the fixed cache of max_position_embeddings (at most 8192)
  std::optional<std::filesystem::path> memory;  // --memory [PATH] / --storage PATH
  std::optional<int> mem_capacity;
  std::optional<int> episode_tokens;  // --episode-tokens: tokens an episode holds (64)
  bool mem_list = false;  // --mem-list: print the episodes of --memory's file and exit
  bool no_memory = false;
  bool quiescence = false;
  std::optional<float> quiescence_threshold;
  std::optional<float> gate_entropy;   // --gate-entropy: listen above this entropy (nats)
  std::optional<float> gate_top_prob;  // --gate-top-prob: listen below this top probability
  std::optional<float> gate_end_prob;  // --gate-end-prob: listen at this end-of-turn probability
  bool gate_yield = false;             // --gate-yield: listen when input is pending
  std::optional<int64_t> gate_interrupts;  // --gate-interrupts N: act once N tool interrupts wait
  std::optional<float> consolidate_after_s;
  std::filesystem::path trace_file;
  // --tools ROOT: the built-in tools over ROOT (an existing directory); empty: tools are off.
  std::filesystem::path tools_root;
  std::optional<int64_t> tool_steps;  // --tool-steps N: calls a turn (actors::kDefaultToolSteps)
};

// Parses argv (without argv[0]). Errors are messages for "infer: <message>", exit status 2.
Result<Options> parse_options(std::span<const std::string_view> args);
// A switch that parses but whose feature is not in this build yet: the one-line message, or "".
std::string unavailable_feature(const Options& opts);
// -f FILE: reads the file into opts.prompt (a kIo error when it cannot be read).
Result<void> read_prompt_file(Options& opts);
// Every long switch name, for the --help test and the did-you-mean hint.
std::vector<std::string_view> switch_names();
// The switch closest to an unknown `arg` when it is a near miss (a typo), else empty.
std::string_view closest_switch(std::string_view arg);
// "none", "q8" or "q4".
const char* quant_name(Quant q);
// The --help text.
std::string usage();

// Flags win over generation_config.json; see usage() for the rules.
SamplingParams resolve_sampling(const Options& opts, const GenerationConfig& gen);

}  // namespace infer::cli
