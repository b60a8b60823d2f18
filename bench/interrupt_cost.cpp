// interrupt_cost: decode ms per token with interrupts off, hooked in and idle (one atomic load a
// token), and hooked in while a PTY streams output (`yes`: its drain thread raising and
// coalescing an interrupt that nobody acks) and, apart, the same PTY with no interrupts, side by
// side: rounds interleave the four so load
// changes on a shared machine hit them alike; medians. Then the cost of one injection.
// Usage: build/bench/interrupt_cost MODEL_DIR [TOKENS=64] [ROUNDS=7] [THREADS=2]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "actors/engine.h"
#include "actors/interrupt_injection.h"
#include "model/cpu_forward.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "model/tokenizer/tokenizer.h"
#include "tools_vfs/interrupt_sources.h"
#include "tools_vfs/interrupts.h"
#include "tools_vfs/pty_set.h"

namespace {

using namespace infer;

class NullSink : public actors::TokenSink {
 public:
  actors::Verdict token(const actors::Step&) override { return actors::Verdict::kKeep; }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// The median of the rounds' ratios a[i] / b[i], as a change in percent: runs of one round sit
// side by side in time, so the load of the moment cancels out of each ratio.
double paired_change(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) r.push_back(a[i] / b[i]);
  return 100.0 * (median(r) - 1.0);
}

// One turn from a fresh context; decode ms per decoded token.
double turn_ms_per_token(actors::Engine& e, const std::vector<int32_t>& prompt, int64_t n) {
  e.reset();
  const int64_t decoded0 = e.decoded();
  actors::TurnRequest r;
  r.input = prompt;
  r.max_tokens = n;
  r.end_ids = actors::EndIds::kIgnore;
  NullSink sink;
  const actors::TurnOutcome out = e.run_turn(r, sink);
  const int64_t decoded = e.decoded() - decoded0;
  return decoded > 0 ? out.decode_ms / double(decoded) : 0.0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [TOKENS=64] [ROUNDS=7] [THREADS=2]\n", argv[0]);
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  const int64_t tokens = argc > 2 ? std::atoll(argv[2]) : 64;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 7;
  const int threads = argc > 4 ? std::atoi(argv[4]) : 2;
  ThreadPool pool(threads);
  auto model = Model::load(dir, LoadOptions{}, pool);
  auto tok = Tokenizer::load(dir / "tokenizer.json");
  if (!model || !tok) {
    std::fprintf(stderr, "interrupt_cost: %s\n",
                 (!model ? model.error() : tok.error()).message.c_str());
    return 1;
  }
  const std::vector<int32_t> prompt = tok->encode("<|turn>user\nWrite a story.<turn|>\n", true);
  // Room for an 8 KiB injection (at most one id a byte, plus its frame).
  const int64_t max_positions = int64_t(prompt.size()) + tokens + 16384;

  tools::InterruptSet interrupts;
  tools::PtyInterrupts adapter(interrupts);
  const std::string root = std::filesystem::temp_directory_path().string();
  auto ptys = tools::PtySet::create(root, {}, adapter.callback());
  if (!ptys) {
    std::fprintf(stderr, "interrupt_cost: %s\n", ptys.error().message.c_str());
    return 1;
  }
  adapter.attach(ptys->get());
  // The same stream without interrupts: what the PTY and its drain thread cost by themselves.
  auto bare_ptys = tools::PtySet::create(root, {});
  if (!bare_ptys) return 1;

  actors::EngineOptions off;
  off.max_positions = max_positions;
  actors::EngineOptions hooked = off;
  hooked.boundary = actors::interrupt_injection(interrupts, *tok);
  const auto forward = [&] { return std::make_shared<CpuForward>(**model, pool, max_positions); };
  actors::Engine e_off(forward(), off);
  actors::Engine e_on(forward(), hooked);

  // off twice (two engines alike): their difference is the noise floor of this machine.
  actors::Engine e_off2(forward(), off);
  std::vector<double> ms_off, ms_off2, ms_idle, ms_streaming, ms_bare_stream;
  const auto streaming = [&](tools::PtySet& set, actors::Engine& e) {
    tools::PtyOpenRequest req;
    req.argv = {"yes", "streaming output"};
    auto id = set.open(req);
    if (!id) {
      std::fprintf(stderr, "interrupt_cost: %s\n", id.error().message.c_str());
      std::exit(1);
    }
    const double ms = turn_ms_per_token(e, prompt, tokens);
    (void)set.close(*id);
    (void)set.wait_all_closed(std::chrono::seconds(5));
    return ms;
  };
  (void)turn_ms_per_token(e_off, prompt, tokens);  // warm-up: page in the weights
  for (int r = 0; r < rounds; ++r) {
    // Alternate which goes first: the first run of a round follows the last one's stream.
    if (r % 2 == 0) ms_off.push_back(turn_ms_per_token(e_off, prompt, tokens));
    ms_idle.push_back(turn_ms_per_token(e_on, prompt, tokens));
    ms_off2.push_back(turn_ms_per_token(e_off2, prompt, tokens));
    if (r % 2 == 1) ms_off.push_back(turn_ms_per_token(e_off, prompt, tokens));
    ms_streaming.push_back(streaming(**ptys, e_on));
    ms_bare_stream.push_back(streaming(**bare_ptys, e_off));
  }
  const auto live = interrupts.list();
  const uint64_t streamed = live.empty() ? 0 : live.back().text_bytes + live.back().dropped_bytes;

  // One injection: an 8 KiB interrupt acked, taken, framed, encoded, appended and prefilled.
  for (const auto& i : interrupts.list()) (void)interrupts.drop(i.id);
  std::vector<double> inject_ms;
  for (int r = 0; r < rounds; ++r) {
    e_on.reset();
    actors::TurnRequest req;
    req.input = prompt;
    NullSink sink;
    (void)e_on.run_turn(req, sink);  // prefill the prompt
    const auto id = interrupts.raise({tools::SourceKind::kPty, 99}, std::string(8191, 'x') + "\n");
    if (!id || !interrupts.ack(*id)) return 1;
    req.input = {};
    req.max_tokens = 1;
    req.end_ids = actors::EndIds::kIgnore;
    const auto t0 = std::chrono::steady_clock::now();
    (void)e_on.run_turn(req, sink);
    inject_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }

  const double off_ms = median(ms_off), idle_ms = median(ms_idle);
  const double streaming_ms = median(ms_streaming), bare_ms = median(ms_bare_stream);
  std::printf("model %s, %d threads, %lld tokens a turn, %d rounds (medians)\n",
              dir.string().c_str(), threads, (long long)tokens, rounds);
  std::printf("decode ms/token (medians), change (median of the rounds' paired ratios):\n");
  std::printf("  off                                 %.3f\n", off_ms);
  std::printf("  off again (the noise floor)         %.3f  %+.1f%%\n", median(ms_off2),
              paired_change(ms_off2, ms_off));
  std::printf("  hooked, idle                        %.3f  %+.1f%%\n", idle_ms,
              paired_change(ms_idle, ms_off));
  std::printf("  a PTY streaming, no interrupts      %.3f  %+.1f%%\n", bare_ms,
              paired_change(ms_bare_stream, ms_off));
  std::printf("  a PTY streaming, raising interrupts %.3f  %+.1f%%\n", streaming_ms,
              paired_change(ms_streaming, ms_off));
  std::printf("streamed into the last round's interrupt (never acked): %llu bytes\n",
              (unsigned long long)streamed);
  std::printf("one 8 KiB injection (%lld ids) + its prefill + 1 token: %.1f ms (median)\n",
              (long long)(e_on.injected() / rounds), median(inject_ms));
  return 0;
}
