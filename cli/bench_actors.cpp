// --bench-actors: the same forward pass, greedy and with end ids as ordinary tokens (so both runs
// generate every token), driven by the Engine's loop on this thread and by the actor pipeline. The hop latency
// is measured per token from the stream's send (TokenEvent::emit_ns) to the front end's call,
// that is stream -> gate -> tokenizer -> io.
#include "cli/bench_actors.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "actors/engine.h"
#include "actors/pipeline.h"
#include "cli/bench_output.h"
#include "cli/session.h"

namespace infer::cli {
namespace {

struct Run {
  std::vector<int32_t> ids;
  double tokens_per_s = 0.0;  // (n - 1) tokens over the time from the first to the last token
  std::vector<double> hop_us;
};

std::vector<int32_t> bench_prompt(int64_t V) {
  std::vector<int32_t> p = {2};
  for (int i = 1; i < 32; ++i) p.push_back(int32_t((i * 7919) % V));
  return p;
}

// Records the ids and when the first and the last arrived.
class RunSink : public actors::TokenSink {
 public:
  explicit RunSink(int64_t n) { run_.ids.reserve(size_t(n)); }
  actors::Verdict token(const actors::Step& s) override {
    last_ns_ = actors::steady_ns();
    if (run_.ids.empty()) first_ns_ = last_ns_;
    run_.ids.push_back(s.id);
    return actors::Verdict::kKeep;
  }
  Run finish() {
    const double s = double(last_ns_ - first_ns_) * 1e-9;
    run_.tokens_per_s = s > 0 ? double(run_.ids.size() - 1) / s : 0.0;
    return std::move(run_);
  }

 private:
  Run run_;
  int64_t first_ns_ = 0, last_ns_ = 0;
};

// The Engine's loop on this thread, without actors.
Result<Run> bare_run(const Session& s, const std::vector<int32_t>& prompt, int64_t n) {
  s.forward->reset();
  actors::EngineOptions o = s.pipeline.engine;
  o.sampling = SamplingParams{};
  actors::Engine engine(s.forward, o);
  RunSink sink(n);
  actors::TurnRequest turn;
  turn.input = prompt;
  turn.max_tokens = n;
  turn.end_ids = actors::EndIds::kIgnore;
  if (actors::TurnOutcome out = engine.run_turn(turn, sink); out.error) return *out.error;
  return sink.finish();
}

class BenchFrontEnd : public actors::FrontEnd {
 public:
  void token(const actors::TokenEvent& t) override {
    const int64_t now = actors::steady_ns();
    if (run_.ids.empty()) first_ns_ = now;
    last_ns_ = now;
    run_.ids.push_back(t.id);
    run_.hop_us.push_back(double(now - t.emit_ns) * 1e-3);
  }
  void turn_end(const actors::TurnEnd&) override {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
  }
  void error(const actors::ErrorEvent& e) override {
    std::fprintf(stderr, "infer: %s\n", e.message.c_str());
  }
  Run wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    const double s = double(last_ns_ - first_ns_) * 1e-9;
    run_.tokens_per_s = s > 0 ? double(run_.ids.size() - 1) / s : 0.0;
    return run_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Run run_;
  int64_t first_ns_ = 0, last_ns_ = 0;
};

Run actors_run(Session& s, const std::vector<int32_t>& prompt, int64_t n) {
  s.forward->reset();
  actors::PipelineOptions o = s.pipeline;
  o.engine.sampling = SamplingParams{};
  BenchFrontEnd front;
  {
    actors::Pipeline p(s.forward, o, front);
    actors::TurnOptions turn;
    turn.end_ids = actors::EndIds::kIgnore;
    p.send("", prompt, true, n, std::move(turn));
    return front.wait();
  }
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

}  // namespace

Result<void> run_bench_actors(const Options& opts) {
  INFER_TRY(std::unique_ptr<Session> s, open_session(opts, false));
  const int64_t n = std::clamp<int64_t>(opts.max_tokens, 2, s->pipeline.engine.max_positions - 64);
  const std::vector<int32_t> prompt = bench_prompt(s->forward->vocab_size());
  double bare_tps = 0.0, actors_tps = 0.0;
  std::vector<double> hops;
  bool same = true;
  for (int rep = 0; rep < 2; ++rep) {
    INFER_TRY(Run bare, bare_run(*s, prompt, n));
    const Run act = actors_run(*s, prompt, n);
    same = same && bare.ids == act.ids;
    bare_tps = std::max(bare_tps, bare.tokens_per_s);
    actors_tps = std::max(actors_tps, act.tokens_per_s);
    hops.insert(hops.end(), act.hop_us.begin(), act.hop_us.end());
  }
  nlohmann::ordered_json j;
  j["model_dir"] = s->choice.random_config.empty() ? s->choice.dir.string()
                                                   : s->choice.random_config.string();
  j["backend"] = s->backend_name;
  j["threads"] = s->threads.threads;
  j["tokens"] = n;
  j["same_tokens"] = same;
  j["bare_tokens_per_s"] = bare_tps;
  j["actors_tokens_per_s"] = actors_tps;
  j["actors_overhead_us_per_token"] =
      bare_tps > 0 && actors_tps > 0 ? (1.0 / actors_tps - 1.0 / bare_tps) * 1e6 : 0.0;
  j["hop_latency_us_median"] = percentile(hops, 0.5);
  j["hop_latency_us_p90"] = percentile(hops, 0.9);
  j["hop_latency_us_max"] = percentile(hops, 1.0);
  INFER_TRY_VOID(write_bench_json(opts, j));
  std::fprintf(stderr,
               "bench-actors: %lld tokens, bare %.1f tokens/s, actors %.1f tokens/s, hop median "
               "%.1f us%s\n",
               (long long)n, bare_tps, actors_tps, percentile(hops, 0.5),
               same ? "" : " (TOKENS DIFFER)");
  return Ok{};
}

}  // namespace infer::cli
