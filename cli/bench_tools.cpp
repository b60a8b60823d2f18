// The tools' idle cost: each run decodes kRunTokens greedy tokens from the same prompt on
// a fresh engine; a step's cost is the wall time between two tokens reaching the sink (forward,
// sampling, the sink and, with the loop, the parser), so what the loop adds per token is in it.
// The variants alternate within each round of short runs, so that load on the shared machine
// falls on all of them alike: on the shared 2-core machine a run's mean jumped between ~80 and
// ~190 ms a token as other work came and went. Reported: each variant's median and 10th
// percentile step over all its runs, and the median over rounds of the ratio of a round's run
// means (adjacent in time, so under the same load).
#include "cli/bench_tools.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "actors/engine.h"
#include "actors/tool_loop.h"
#include "cli/bench.h"
#include "cli/session.h"
#include "model/tool_format/tool_tokens.h"

namespace infer::cli {
namespace {

constexpr int kRounds = 16;
constexpr int kRunTokens = 48;  // decode steps a run (after the first, sampled from the prompt)
// Each run starts from this much of the bench prompt: the variants' decode steps see the same
// context, and 15 runs do not spend minutes in prefill on a slow CPU.
constexpr size_t kPromptIds = 32;

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[size_t(p * double(v.size() - 1))];
}
double median(std::vector<double> v) { return percentile(std::move(v), 0.5); }

// Times the steps after the first (the first is sampled from the prompt's logits).
class StepClock : public actors::ToolTurnSink {
 public:
  StepClock() { step_ms.reserve(kRunTokens); }
  actors::Verdict token(const actors::Step& s, bool) override {
    const int64_t now = actors::steady_ns();
    if (s.index == 0) {
      first_ns_ = now;
    } else {
      step_ms.push_back(double(now - last_ns_) * 1e-6);
    }
    last_ns_ = now;
    ++tokens_;
    return actors::Verdict::kKeep;
  }
  void event(const actors::ToolEvent&) override { ++events; }
  actors::ToolAnswer run(uint64_t, const std::string&, const nlohmann::json&) override {
    return {nlohmann::json{{"error", "no call runs in the benchmark"}}, true, 0.0};
  }
  double ms_per_token() const {
    return tokens_ > 1 ? double(last_ns_ - first_ns_) * 1e-6 / double(tokens_ - 1) : 0.0;
  }
  int events = 0;
  std::vector<double> step_ms;

 private:
  int64_t first_ns_ = 0, last_ns_ = 0, tokens_ = 0;
};

class PlainSink : public actors::TokenSink {
 public:
  explicit PlainSink(StepClock& clock) : clock_(clock) {}
  actors::Verdict token(const actors::Step& s) override { return clock_.token(s, false); }

 private:
  StepClock& clock_;
};

enum class Variant { kPlain, kLoopOff, kLoopOn };

// One run: its mean ms a token; its steps are appended to `steps`.
Result<double> run_once(Backend& backend, const std::vector<int32_t>& ids, const Tokenizer& tok,
                        const ToolTokens& markers, Variant v, int& events,
                        std::vector<double>& steps) {
  Forward& fwd = *backend.forward;
  fwd.reset();
  actors::EngineOptions o;
  o.max_positions = int64_t(ids.size()) + kRunTokens + 1;
  o.prefill_chunk = std::max<int64_t>(1, int64_t(ids.size()));
  if (gpu::GpuForward* g = backend.gpu; g != nullptr) {
    o.decode_argmax = [g](int32_t id) { return g->decode_greedy(id); };
  }
  actors::Engine engine(std::shared_ptr<Forward>(std::shared_ptr<void>(), &fwd), std::move(o));
  actors::TurnRequest turn;
  turn.input = ids;
  turn.max_tokens = kRunTokens + 1;
  turn.end_ids = actors::EndIds::kIgnore;
  StepClock clock;
  actors::TurnOutcome out;
  if (v == Variant::kPlain) {
    PlainSink plain(clock);
    out = engine.run_turn(turn, plain);
  } else {
    actors::ToolLoop loop({&tok, markers, actors::kDefaultToolSteps, v == Variant::kLoopOn});
    out = loop.run_turn(engine, turn, 1, clock);
  }
  if (out.error) return *out.error;
  events += clock.events;
  steps.insert(steps.end(), clock.step_ms.begin(), clock.step_ms.end());
  return clock.ms_per_token();
}

}  // namespace

Result<nlohmann::ordered_json> bench_tools(Backend& backend, const std::vector<int32_t>& ids,
                                           const Tokenizer& tok, const Options& opts) {
  INFER_TRY(const ToolTokens markers, ToolTokens::from(tok));
  // Tools on: the built-in tools open on ROOT, as a session holds them (idle: no call).
  INFER_TRY(const auto tools, open_tools(opts, &tok));
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + std::min(ids.size(), kPromptIds));
  std::vector<double> ms[3], steps[3];
  int events = 0;
  for (int round = 0; round < kRounds; ++round) {
    for (Variant v : {Variant::kPlain, Variant::kLoopOff, Variant::kLoopOn}) {
      INFER_TRY(const double m,
                run_once(backend, prompt, tok, markers, v, events, steps[int(v)]));
      ms[int(v)].push_back(m);
    }
  }
  const double plain = median(steps[0]), off = median(steps[1]), on = median(steps[2]);
  std::vector<double> off_ratio, on_ratio;
  for (int r = 0; r < kRounds; ++r) {
    off_ratio.push_back(ms[1][size_t(r)] / ms[0][size_t(r)]);
    on_ratio.push_back(ms[2][size_t(r)] / ms[0][size_t(r)]);
  }
  nlohmann::ordered_json j = {
      {"rounds", kRounds},
      {"decode_tokens_per_run", kRunTokens},
      {"prompt_tokens", prompt.size()},
      {"plain_run_mean_ms_per_token", ms[0]},
      {"tools_off_run_mean_ms_per_token", ms[1]},
      {"tools_on_idle_run_mean_ms_per_token", ms[2]},
      {"plain_run_mean_median", median(ms[0])},
      {"tools_off_run_mean_median", median(ms[1])},
      {"tools_on_idle_run_mean_median", median(ms[2])},
      {"plain_step_ms_median", plain},
      {"tools_off_step_ms_median", off},
      {"tools_on_idle_step_ms_median", on},
      {"plain_step_ms_p10", percentile(steps[0], 0.1)},
      {"tools_off_step_ms_p10", percentile(steps[1], 0.1)},
      {"tools_on_idle_step_ms_p10", percentile(steps[2], 0.1)},
      {"tools_off_vs_plain_step_median", plain > 0 ? off / plain : 0.0},
      {"tools_on_idle_vs_plain_step_median", plain > 0 ? on / plain : 0.0},
      {"tools_off_vs_plain_round_median", median(off_ratio)},
      {"tools_on_idle_vs_plain_round_median", median(on_ratio)},
      {"tool_events", events},  // calls the random model wrote (should be 0)
  };
  std::fprintf(stderr,
               "  tools     decode ms/token, median step of %d runs x %d tokens each: plain %.3f, "
               "tools off (calls parsed) %.3f, tools on and idle %.3f; against plain, median "
               "of the rounds: off x%.4f, on x%.4f\n",
               kRounds, kRunTokens, plain, off, on, median(off_ratio), median(on_ratio));
  return j;
}

}  // namespace infer::cli
