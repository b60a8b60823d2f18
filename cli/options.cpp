// Option parsing: one table of switches, each with its value parser and checks. Anything wrong
// is an Error whose message main prints as "infer: <message>" before exiting with status 2.
#include "cli/options.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

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

// Levenshtein distance, two rows.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// Checks between switches, once all are read.
Result<void> validate(const Options& o) {
  if (o.help || o.version) return Ok{};
  if (o.prompt_file && o.prompt) {
    return bad("-f/--file and a prompt (-p/--prompt or PROMPT) are given: give the prompt once");
  }
  if (o.prompt_file && o.prompt_ids) return bad("give either -f/--file or --prompt-ids, not both");
  // From here a prompt file counts as the text prompt it will become.
  const bool text_prompt = o.prompt || o.prompt_file;
  if (o.prompt && o.prompt_ids) return bad("give either a text prompt or --prompt-ids, not both");
  if (o.tokenize && !text_prompt) return bad("--tokenize needs a text prompt");
  if (o.tokenize && (o.bench || o.serve)) return bad("--tokenize cannot be combined with a mode");
  if (int(o.bench) + int(o.serve) + int(o.bench_actors) > 1) {
    return bad("--bench, --bench-actors and --serve are separate modes");
  }
  if ((o.bench || o.serve || o.bench_actors) && (text_prompt || o.prompt_ids)) {
    return bad(std::string(o.bench ? "--bench" : o.serve ? "--serve" : "--bench-actors") +
               " takes no prompt");
  }
  // One-shot generation runs without the actor pipeline: its gate and debounce do not apply.
  if ((o.gate_entropy || o.gate_top_prob || o.gate_end_prob || o.gate_yield ||
       o.consolidate_after_s) &&
      (text_prompt || o.prompt_ids)) {
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
  if (o.system_prompt && text_prompt && !o.chat) {
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
  if (o.bench_memory && (!o.bench || o.bench_stream || o.bench_context || o.bench_quiescence)) {
    return bad("--bench-memory needs --bench, without the other --bench-* modes");
  }
  if (o.bench_memory && !o.memory) return bad("--bench-memory needs --memory PATH (a scratch store)");
  if (o.no_memory && o.memory) return bad("--no-memory conflicts with --memory/--storage");
  if (o.no_ring && (o.anchors || o.window || o.recall || o.evict)) {
    return bad("--no-ring conflicts with --anchors/--window (-c/--ctx-size)/--recall/--evict");
  }
  if (o.repeat_last_n && !o.repeat_penalty) return bad("--repeat-last-n needs --repeat-penalty");
  if (o.force_threads && o.threads == 0) return bad("--force-threads needs --threads N");
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
    if (s == nullptr) {
      const std::string_view near = closest_switch(arg);
      return bad("unknown option '" + std::string(arg) + "' (" +
                 (near.empty() ? std::string() : "did you mean " + std::string(near) + "? ") +
                 "see infer --help)");
    }
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

std::vector<std::string_view> switch_names() {
  std::vector<std::string_view> names;
  for (const Switch& s : kSwitches) names.push_back(s.name);
  return names;
}

std::string_view closest_switch(std::string_view arg) {
  std::string_view best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (const Switch& s : kSwitches) {
    const size_t d = edit_distance(arg, s.name);
    if (d < best_distance) {
      best_distance = d;
      best = s.name;
    }
  }
  // A near miss: a typo or two, and at most a third of the name (so "--top" is not "--tools").
  const size_t limit = std::min<size_t>(2, best.size() / 4);
  return best_distance <= limit ? best : std::string_view();
}

std::string unavailable_feature(const Options& o) {
  if (!o.tools_root.empty()) return "--tools: tools are not built yet";
  return "";
}

}  // namespace infer::cli
