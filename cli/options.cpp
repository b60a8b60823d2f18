// Option parsing over the switch table (option_switches.cpp) and the checks between switches.
// Anything wrong is an Error whose message main prints as "infer: <message>" (exit status 2).
#include "cli/options.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "cli/option_switches.h"
#include "cli/option_values.h"

namespace infer::cli {
namespace {

const Switch* find_switch(std::string_view arg) {
  for (const Switch& s : switches()) {
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
       o.gate_interrupts || o.consolidate_after_s) &&
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
  if (o.tool_steps && o.tools_root.empty()) return bad("--tool-steps needs --tools ROOT");
  if (o.gate_interrupts && o.tools_root.empty()) {
    return bad("--gate-interrupts needs --tools ROOT (interrupts come from its PTYs and clients)");
  }
  if (!o.tools_root.empty()) {
    // The tools run in the chat: the session, --chat (declarations in the system turn), --serve
    // and --bench (its cost, tools on and idle).
    if ((text_prompt && !o.chat) || o.prompt_ids || o.tokenize || o.bench_actors) {
      return bad("--tools applies to the interactive/pipe session, --chat, --serve and --bench");
    }
    if (o.bench && (o.bench_stream || o.bench_context || o.bench_quiescence || o.bench_memory)) {
      return bad("--bench --tools measures the tool-call loop's idle cost: not with the other "
                 "--bench-* modes");
    }
    std::error_code ec;
    const auto status = std::filesystem::status(o.tools_root, ec);
    if (!std::filesystem::exists(status)) {
      return bad("--tools: '" + o.tools_root.string() + "' does not exist (ROOT must be an "
                 "existing directory)");
    }
    if (!std::filesystem::is_directory(status)) {
      return bad("--tools: '" + o.tools_root.string() + "' is not a directory");
    }
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
  for (const Switch& s : switches()) names.push_back(s.name);
  return names;
}

std::string_view closest_switch(std::string_view arg) {
  std::string_view best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (const Switch& s : switches()) {
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

std::string unavailable_feature(const Options&) {
  return "";  // every switch is built
}

}  // namespace infer::cli
