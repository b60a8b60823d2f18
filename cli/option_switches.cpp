// The switch table (option_switches.h): each switch with its value parser and checks.
#include "cli/option_switches.h"

#include <limits>
#include <string>

#include "cli/option_values.h"

namespace infer::cli {
namespace {

template <class T>
Result<void> set_int(std::optional<T>& out, std::string_view name, Value v, T lo, T hi) {
  INFER_TRY(out, parse_int<T>(name, *v, lo, hi));
  return Ok{};
}
Result<void> set_float(std::optional<float>& out, std::string_view name, Value v, float lo,
                       float hi) {
  INFER_TRY(out, parse_float(name, *v, lo, hi));
  return Ok{};
}
Result<void> set_quant(Options& o, std::string_view name, Quant q) {
  if (o.quant != Quant::kAsStored && o.quant != q) {
    return bad(std::string(name) + " conflicts with an earlier --q4/--q8/--quant");
  }
  o.quant = q;
  return Ok{};
}

constexpr int kIntMax = std::numeric_limits<int>::max();
constexpr float kFloatMax = std::numeric_limits<float>::max();

const Switch kSwitches[] = {
    {"--help", 'h', Arg::kNone,
     [](Options& o, auto, Value) -> Result<void> {
       o.help = true;
       return Ok{};
     }},
    {"--version", 0, Arg::kNone,
     [](Options& o, auto, Value) -> Result<void> {
       o.version = true;
       return Ok{};
     }},
    {"--model", 'm', Arg::kRequired,
     [](Options& o, auto, Value v) -> Result<void> {
       o.model_dir = std::string(*v);
       return Ok{};
     }},
    {"--max-tokens", 'n', Arg::kRequired,
     [](Options& o, auto n, Value v) -> Result<void> {
       INFER_TRY(o.max_tokens, parse_int<int64_t>(n, *v, 0, std::numeric_limits<int64_t>::max()));
       return Ok{};
     }},
    {"--prompt", 'p', Arg::kRequired,
     [](Options& o, auto n, Value v) -> Result<void> {
       if (o.prompt) return bad(std::string(n) + ": the prompt is given twice");
       o.prompt = std::string(*v);
       return Ok{};
     }},
    {"--file", 'f', Arg::kRequired,
     [](Options& o, auto n, Value v) -> Result<void> {
       if (o.prompt_file) return bad(std::string(n) + ": the prompt file is given twice");
       o.prompt_file = std::filesystem::path(std::string(*v));
       return Ok{};
     }},
    {"--prompt-ids", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) -> Result<void> {
       INFER_TRY(o.prompt_ids, parse_ids(n, *v));
       return Ok{};
     }},
    {"--output", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) -> Result<void> {
       if (*v == "text")
         o.output = OutputMode::kText;
       else if (*v == "ids")
         o.output = OutputMode::kIds;
       else
         return bad(std::string(n) + ": expected text or ids, got '" + std::string(*v) + "'");
       return Ok{};
     }},
    {"--temperature", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) { return set_float(o.temperature, n, v, 0.0f, kFloatMax); }},
    {"--temp", 0, Arg::kRequired,  // llama.cpp's spelling
     [](Options& o, auto n, Value v) { return set_float(o.temperature, n, v, 0.0f, kFloatMax); }},
    {"--min-p", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) { return set_float(o.min_p, n, v, 0.0f, 1.0f); }},
    // A penalty below 1 rewards repeats (llama.cpp allows it); 0 would zero every seen logit.
    {"--repeat-penalty", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) {
       return set_float(o.repeat_penalty, n, v, 0.01f, 100.0f);
     }},
    {"--repeat-last-n", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) { return set_int(o.repeat_last_n, n, v, 0, 1 << 20); }},
    {"--top-k", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) { return set_int(o.top_k, n, v, 0, kIntMax); }},
    {"--top-p", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) { return set_float(o.top_p, n, v, 0.0f, 1.0f); }},
    {"--seed", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) {
       return set_int<uint64_t>(o.seed, n, v, 0, std::numeric_limits<uint64_t>::max());
     }},
    {"--dump-logits", 0, Arg::kRequired,
     [](Options& o, auto, Value v) -> Result<void> {
       o.dump_logits = std::string(*v);
       return Ok{};
     }},
    {"--chat", 0, Arg::kNone,
     [](Options& o, auto, Value) -> Result<void> {
       o.chat = true;
       return Ok{};
     }},
    {"--special", 0, Arg::kNone,
     [](Options& o, auto, Value) -> Result<void> {
       o.special = true;
       return Ok{};
     }},
    {"--system", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) -> Result<void> {
       if (o.system_prompt) return bad(std::string(n) + ": the system text is given twice");
       o.system_prompt = std::string(*v);
       return Ok{};
     }},
    {"--tokenize", 0, Arg::kNone,
     [](Options& o, auto, Value) -> Result<void> {
       o.tokenize = true;
       return Ok{};
     }},
    {"--threads", 't', Arg::kRequired,
     [](Options& o, auto n, Value v) -> Result<void> {
       INFER_TRY(o.threads, parse_int<int>(n, *v, 1, 4096));
       return Ok{};
     }},
    {"--force-threads", 0, Arg::kNone,
     [](Options& o, auto, Value) -> Result<void> {
       o.force_threads = true;
       return Ok{};
     }},
    {"--gpu", 0, Arg::kNone,
     [](Options& o, auto, Value) -> Result<void> {
       o.gpu = true;
       return Ok{};
     }},
    {"--q4", 0, Arg::kNone,
     [](Options& o, auto n, Value) { return set_quant(o, n, Quant::kQ4_0); }},
    {"--mixed", 0, Arg::kNone,
     [](Options& o, auto n, Value) { return set_quant(o, n, Quant::kQ4_0); }},
    {"--q8", 0, Arg::kNone,
     [](Options& o, auto n, Value) { return set_quant(o, n, Quant::kQ8_0); }},
    {"--quant", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) -> Result<void> {
       if (*v == "q4") return set_quant(o, n, Quant::kQ4_0);
       if (*v == "q8") return set_quant(o, n, Quant::kQ8_0);
       if (*v == "none") return set_quant(o, n, Quant::kAsStored);
       return bad(std::string(n) + ": expected q4, q8 or none, got '" + std::string(*v) + "'");
     }},
    {"--device", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) { return set_int(o.device, n, v, 0, 255); }},
    {"--gpu-tune", 0, Arg::kRequired,
     [](Options& o, auto, Value v) -> Result<void> {
       INFER_TRY(gpu::TuningOverrides t, gpu::parse_gpu_tune(*v));
       o.gpu_tune.insert(o.gpu_tune.end(), t.begin(), t.end());
       return Ok{};
     }},
    {"--prefill-chunk", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) { return set_int<int64_t>(o.prefill_chunk, n, v, 1, 65536); }},
    {"--serve", 0, Arg::kNone,
     [](Options& o, auto, Value) -> Result<void> {
       o.serve = true;
       return Ok{};
     }},
    {"--bench", 0, Arg::kOptional,
     [](Options& o, auto, Value v) -> Result<void> {
       o.bench = true;
       if (v) o.bench_file = std::string(*v);
       return Ok{};
     }},
    {"--profile", 0, Arg::kNone,
     [](Options& o, auto, Value) -> Result<void> {
       o.profile = true;
       return Ok{};
     }},
    {"--bench-stream", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) {
       return set_int<int64_t>(o.bench_stream, n, v, 1, int64_t(1) << 40);
     }},
    {"--bench-every", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) {
       return set_int<int64_t>(o.bench_every, n, v, 1, int64_t(1) << 40);
     }},
    {"--bench-memory", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) {
       return set_int<int64_t>(o.bench_memory, n, v, 1, int64_t(1) << 20);
     }},
    {"--bench-quiescence", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) {
       return set_int<int64_t>(o.bench_quiescence, n, v, 1, int64_t(1) << 20);
     }},
    {"--bench-context", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) -> Result<void> {
       INFER_TRY(std::vector<int32_t> ids, parse_ids(n, *v));
       o.bench_context.emplace(ids.begin(), ids.end());
       return Ok{};
     }},
    {"--anchors", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) { return set_int(o.anchors, n, v, 0, 1 << 20); }},
    {"--window", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) { return set_int(o.window, n, v, 1, 1 << 24); }},
    // llama.cpp's context size: here the ring's window, the tokens it keeps besides the anchors.
    {"--ctx-size", 'c', Arg::kRequired,
     [](Options& o, auto n, Value v) { return set_int(o.window, n, v, 1, 1 << 24); }},
    {"--recall", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) { return set_int(o.recall, n, v, 0, 128); }},
    {"--evict", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) -> Result<void> {
       if (*v == "fifo")
         o.evict = EvictPolicy::kFifo;
       else if (*v == "mass")
         o.evict = EvictPolicy::kMass;
       else
         return bad(std::string(n) + ": expected fifo or mass, got '" + std::string(*v) + "'");
       return Ok{};
     }},
    {"--no-ring", 0, Arg::kNone,
     [](Options& o, auto, Value) -> Result<void> {
       o.no_ring = true;
       return Ok{};
     }},
    {"--memory", 0, Arg::kOptional,
     [](Options& o, auto, Value v) -> Result<void> {
       o.memory = v ? std::filesystem::path(std::string(*v)) : ".episodic.mem";
       return Ok{};
     }},
    {"--storage", 0, Arg::kRequired,
     [](Options& o, auto, Value v) -> Result<void> {
       o.memory = std::string(*v);
       return Ok{};
     }},
    {"--mem-capacity", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) { return set_int(o.mem_capacity, n, v, 1, 1 << 24); }},
    {"--episode-tokens", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) { return set_int(o.episode_tokens, n, v, 1, 4096); }},
    {"--mem-list", 0, Arg::kNone,
     [](Options& o, auto, Value) -> Result<void> {
       o.mem_list = true;
       return Ok{};
     }},
    {"--no-memory", 0, Arg::kNone,
     [](Options& o, auto, Value) -> Result<void> {
       o.no_memory = true;
       return Ok{};
     }},
    {"--quiescence", 0, Arg::kNone,
     [](Options& o, auto, Value) -> Result<void> {
       o.quiescence = true;
       return Ok{};
     }},
    {"--quiescence-threshold", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) { return set_float(o.quiescence_threshold, n, v, 0, 2); }},
    {"--gate-entropy", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) { return set_float(o.gate_entropy, n, v, 0, kFloatMax); }},
    {"--gate-top-prob", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) { return set_float(o.gate_top_prob, n, v, 0, 1); }},
    {"--gate-end-prob", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) { return set_float(o.gate_end_prob, n, v, 0, 1); }},
    {"--gate-yield", 0, Arg::kNone,
     [](Options& o, auto, Value) -> Result<void> {
       o.gate_yield = true;
       return Ok{};
     }},
    {"--gate-interrupts", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) {
       return set_int<int64_t>(o.gate_interrupts, n, v, 1, 1 << 20);
     }},
    {"--bench-actors", 0, Arg::kOptional,
     [](Options& o, auto, Value v) -> Result<void> {
       o.bench_actors = true;
       if (v) o.bench_file = std::string(*v);
       return Ok{};
     }},
    {"--consolidate-after", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) {
       return set_float(o.consolidate_after_s, n, v, 0, kFloatMax);
     }},
    {"--trace", 0, Arg::kRequired,
     [](Options& o, auto, Value v) -> Result<void> {
       o.trace_file = std::string(*v);
       return Ok{};
     }},
    {"--tools", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) -> Result<void> {
       if (v->empty()) return bad(std::string(n) + ": ROOT is empty");
       o.tools_root = std::string(*v);
       return Ok{};
     }},
    {"--tool-steps", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) {
       return set_int<int64_t>(o.tool_steps, n, v, 0, 1024);
     }},
};

}  // namespace

std::span<const Switch> switches() { return kSwitches; }

}  // namespace infer::cli
