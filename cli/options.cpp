// Option parsing: one table of switches, each with its value parser and checks. Anything wrong
// is an Error whose message main prints as "infer: <message>" before exiting with status 2.
#include "cli/options.h"

#include <limits>
#include <string>

#include "cli/option_values.h"

namespace infer::cli {
namespace {

enum class Arg { kNone, kRequired, kOptional };
using Value = std::optional<std::string_view>;
using Apply = Result<void> (*)(Options&, std::string_view name, Value value);

struct Switch {
  std::string_view name;  // "--model"
  char short_name;        // 'm', or 0
  Arg arg;
  Apply apply;
};

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
    {"--prompt", 0, Arg::kRequired,
     [](Options& o, auto n, Value v) -> Result<void> {
       if (o.prompt) return bad(std::string(n) + ": the prompt is given twice");
       o.prompt = std::string(*v);
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
     [](Options& o, auto, Value v) -> Result<void> {
       o.tools_root = std::string(*v);
       return Ok{};
     }},
};

const Switch* find_switch(std::string_view arg) {
  for (const Switch& s : kSwitches) {
    if (arg == s.name) return &s;
    if (s.short_name != 0 && arg.size() == 2 && arg[0] == '-' && arg[1] == s.short_name) return &s;
  }
  return nullptr;
}

// Checks between switches, once all are read.
Result<void> validate(const Options& o) {
  if (o.help) return Ok{};
  if (o.prompt && o.prompt_ids) return bad("give either a text prompt or --prompt-ids, not both");
  if (o.tokenize && !o.prompt) return bad("--tokenize needs a text prompt");
  if (o.tokenize && (o.bench || o.serve)) return bad("--tokenize cannot be combined with a mode");
  if (int(o.bench) + int(o.serve) + int(o.bench_actors) > 1) {
    return bad("--bench, --bench-actors and --serve are separate modes");
  }
  if ((o.bench || o.serve || o.bench_actors) && (o.prompt || o.prompt_ids)) {
    return bad(std::string(o.bench ? "--bench" : o.serve ? "--serve" : "--bench-actors") +
               " takes no prompt");
  }
  // One-shot generation runs without the actor pipeline: its gate and debounce do not apply.
  if ((o.gate_entropy || o.gate_top_prob || o.gate_end_prob || o.gate_yield ||
       o.consolidate_after_s) &&
      (o.prompt || o.prompt_ids)) {
    return bad("--gate-*/--consolidate-after apply to the interactive session (no prompt)");
  }
  if (o.prompt_ids && o.prompt_ids->empty()) return bad("--prompt-ids: no ids");
  if (o.chat && (o.prompt_ids || o.bench || o.bench_actors || o.serve)) {
    return bad("--chat wraps a text prompt in a user turn: it takes a prompt, not --prompt-ids "
               "or a mode (the REPL always uses turns)");
  }
  if (o.system_prompt && (o.prompt_ids || o.bench || o.bench_actors)) {
    return bad("--system applies to the REPL, --chat and --serve");
  }
  if (o.system_prompt && o.prompt && !o.chat) {
    return bad("--system with a one-shot prompt needs --chat (without it no template is applied)");
  }
  if (o.device && !o.gpu) return bad("--device needs --gpu");
  if (!o.gpu_tune.empty() && !o.gpu) return bad("--gpu-tune needs --gpu");
  if (o.prefill_chunk && !o.gpu) return bad("--prefill-chunk needs --gpu");
  if (o.profile && !(o.bench && o.gpu)) return bad("--profile needs --bench and --gpu");
  if ((o.bench_stream || o.bench_every || o.bench_context) && !o.bench) {
    return bad("--bench-stream/--bench-every/--bench-context need --bench");
  }
  if (o.bench_stream && o.bench_context) {
    return bad("--bench-stream and --bench-context are separate benchmarks");
  }
  if (o.bench_every && !o.bench_stream) return bad("--bench-every needs --bench-stream");
  if (o.bench_quiescence && (!o.bench || o.bench_stream || o.bench_context)) {
    return bad("--bench-quiescence needs --bench, without --bench-stream/--bench-context");
  }
  if (o.no_memory && o.memory) return bad("--no-memory conflicts with --memory/--storage");
  if (o.no_ring && (o.anchors || o.window || o.recall || o.evict)) {
    return bad("--no-ring conflicts with --anchors/--window/--recall/--evict");
  }
  if (o.quiescence_threshold && !o.quiescence) {
    return bad("--quiescence-threshold needs --quiescence");
  }
  return Ok{};
}

}  // namespace

Result<Options> parse_options(std::span<const std::string_view> args) {
  Options o;
  bool only_positional = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (only_positional || arg.size() < 2 || arg[0] != '-') {
      if (o.prompt) {
        return bad("unexpected argument '" + std::string(arg) +
                   "' (the prompt is already given; quote a prompt of several words)");
      }
      o.prompt = std::string(arg);
      continue;
    }
    if (arg == "--") {
      only_positional = true;
      continue;
    }
    Value inline_value;
    if (const size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      inline_value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    const Switch* s = find_switch(arg);
    if (s == nullptr) return bad("unknown option '" + std::string(arg) + "' (see infer --help)");
    Value value = inline_value;
    if (s->arg == Arg::kNone && inline_value) {
      return bad(std::string(s->name) + " takes no value");
    }
    if (s->arg == Arg::kRequired && !value) {
      if (i + 1 >= args.size()) return bad(std::string(s->name) + " needs a value");
      value = args[++i];
    }
    // An optional value is the next argument unless that looks like a switch (or use --x=V).
    if (s->arg == Arg::kOptional && !value && i + 1 < args.size() &&
        !args[i + 1].starts_with("-")) {
      value = args[++i];
    }
    INFER_TRY_VOID(s->apply(o, s->name, value));
  }
  INFER_TRY_VOID(validate(o));
  return o;
}

std::string unavailable_feature(const Options& o) {
  if (o.memory || o.mem_capacity) return "--memory/--storage: episodic memory is not built yet";
  if (!o.tools_root.empty()) return "--tools: tools are not built yet";
  return "";
}

}  // namespace infer::cli
