// The memory benchmark (bench_memory.h). Decode is timed at the stream (TokenEvent::emit_ns, the
// decode thread's own clock), so the actors' hops do not blur the per-token cost.
#include "cli/bench_memory.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "actors/pipeline.h"
#include "cli/bench_output.h"
#include "cli/session.h"
#include "memory/episode_store.h"
#include "memory/episodic_memory.h"

namespace infer::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

// Collects the stream's send times of one turn's tokens.
class StepTimes : public actors::FrontEnd {
 public:
  void token(const actors::TokenEvent& t) override { emit_ns_.push_back(t.emit_ns); }
  void turn_end(const actors::TurnEnd&) override {
    std::lock_guard lock(mu_);
    done_ = true;
    cv_.notify_all();
  }
  void error(const actors::ErrorEvent& e) override {
    std::fprintf(stderr, "infer: %s\n", e.message.c_str());
  }
  // Milliseconds between consecutive tokens (the first, which follows the prefill, is left out).
  std::vector<double> wait_intervals_ms() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    std::vector<double> ms;
    for (size_t i = 1; i < emit_ns_.size(); ++i) {
      ms.push_back(double(emit_ns_[i] - emit_ns_[i - 1]) * 1e-6);
    }
    return ms;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::vector<int64_t> emit_ns_;
};

std::vector<int32_t> bench_prompt(int64_t V) {
  std::vector<int32_t> p = {2};
  for (int i = 1; i < 32; ++i) p.push_back(int32_t((i * 7919) % V));
  return p;
}

// One greedy turn of n tokens through the pipeline, memory on (link) or off (null).
std::vector<double> decode_run(Session& s, std::shared_ptr<actors::MemoryLink> link,
                               const std::vector<int32_t>& prompt, int64_t n) {
  s.forward->reset();
  actors::PipelineOptions o = s.pipeline;
  o.engine.sampling = SamplingParams{};
  o.memory = link;
  StepTimes times;
  std::vector<double> ms;
  {
    actors::Pipeline p(s.forward, o, times);
    actors::TurnOptions turn;
    turn.end_ids = actors::EndIds::kIgnore;
    p.send("", prompt, true, n, std::move(turn));
    ms = times.wait_intervals_ms();
  }  // the pipeline's end stores what is still queued: outside the timed steps
  if (link) {
    // The next run starts again at position 0, as after a reset (the stream's StreamRestart).
    if (Result<size_t> r = link->end_stream(); !r.ok()) {
      std::fprintf(stderr, "infer: memory: %s\n", r.error().message.c_str());
    }
  }
  return ms;
}

struct DecodeFigures {
  std::vector<double> off, on;
  size_t episodes = 0;
  int64_t dropped = 0;
};

Result<DecodeFigures> bench_decode(Session& s, int64_t n, int reps) {
  std::shared_ptr<actors::MemoryLink> link = s.pipeline.memory;
  const std::vector<int32_t> prompt = bench_prompt(s.forward->vocab_size());
  if (int64_t(prompt.size()) + n <= s.stream_capacity) {
    return Error{ErrorCode::kInvalidArgument,
                 "--bench-memory " + std::to_string(n) + ": the ring holds all " +
                     std::to_string(prompt.size() + size_t(n)) +
                     " tokens, so nothing leaves the window; pass a larger N or --window W"};
  }
  DecodeFigures f;
  // Alternating order (off on, on off, ...) so that drift in the machine's speed falls on both.
  for (int rep = 0; rep < reps; ++rep) {
    for (int k = 0; k < 2; ++k) {
      const bool on = (rep + k) % 2 == 1;
      std::vector<double> ms = decode_run(s, on ? link : nullptr, prompt, n);
      std::vector<double>& dst = on ? f.on : f.off;
      dst.insert(dst.end(), ms.begin(), ms.end());
      std::fprintf(stderr, "bench-memory: decode %s %lld tokens, median %.2f ms\n",
                   on ? "memory on " : "memory off", (long long)n, percentile(ms, 0.5));
    }
  }
  std::lock_guard lock(link->mu);
  f.episodes = link->memory->store().size();
  if (link->buffer) f.dropped = link->buffer->dropped();
  return f;
}

// A store of `count` episodes at path: the trained codebooks and one real episode of `src`,
// copied with keys near its own (so that recall finds, decodes and places them: the cost a turn
// pays), each a distinct id.
Result<void> fill_store(const memory::EpisodicMemory& src, const std::string& path,
                        uint32_t count) {
  memory::StoreGeometry g = src.store().geometry();
  g.capacity = count;
  const std::vector<memory::EpisodeInfo> infos = src.store().list();
  if (infos.empty()) return Error{ErrorCode::kInternal, "bench-memory: no episode was stored"};
  INFER_TRY(memory::Episode e, src.store().read(infos.front().id));
  INFER_TRY(std::unique_ptr<memory::EpisodeStore> st, memory::EpisodeStore::open(path, g));
  INFER_TRY_VOID(st->set_codebooks(src.store().codebooks()));
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  const std::vector<float> key = e.key;
  double norm = 0;
  for (float x : key) norm += double(x) * x;
  const float spread = float(0.3 * std::sqrt(norm / double(std::max<size_t>(key.size(), 1))));
  for (uint32_t i = 0; i < count; ++i) {
    for (size_t j = 0; j < key.size(); ++j) e.key[j] = key[j] + spread * noise(rng);
    INFER_TRY(uint64_t id, st->append(e, 0));
    (void)id;
  }
  return Ok{};
}

// One query length's turns: the whole turn and its phases (EpisodicMemory::last_recall_profile).
struct TurnTimes {
  std::vector<double> total_ms, recall_ms, place_ms;
  std::vector<double> read_kv_ms, query_key_ms, score_ms, decode_ms;
  size_t rescored = 0;  // the most keys one turn scored in fp32
};

struct RecallFigures {
  uint32_t episodes = 0;
  double open_ms = 0;
  double file_bytes_per_episode = 0;
  TurnTimes turn;                     // a 32-token input
  std::vector<double> strengthen_ms;  // the commit after the turn, off its path
  size_t placed_tokens = 0;
  int64_t long_query_tokens = 0;  // the longest query a turn makes (kMaxRecall, or the window)
  TurnTimes long_turn;            // a turn's whole recall with that query
  // The same turns on the exact path (every key in fp32), alternating with the above.
  TurnTimes exact_turn, exact_long_turn;
  size_t differing = 0;  // turns whose hits differed from the exact path's (must be 0)
};

// The episodes, order, association and score of two recalls of one turn (the strength, times
// and counts follow from those and the clock, which moved between them).
bool same_picks(const std::vector<memory::RecallHit>& a, const std::vector<memory::RecallHit>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].id != b[i].id || a[i].association != b[i].association) return false;
  }
  return true;
}

Result<RecallFigures> bench_recall(Session& s, const memory::EpisodicMemory& src,
                                   const memory::MemoryOptions& base, uint32_t count, int reps) {
  RecallFigures f;
  f.episodes = count;
  memory::MemoryOptions mo = base;
  mo.path = base.path + "." + std::to_string(count);
  mo.capacity = count;
  // Every episode qualifies, so each turn pays for ranking them all and for decoding, touching
  // and placing the best (the query, the stream's newest rows, need not resemble the copies).
  mo.min_association = -1.0f;
  INFER_TRY_VOID(fill_store(src, mo.path, count));
  const Clock::time_point t_open = Clock::now();
  INFER_TRY(std::unique_ptr<memory::EpisodicMemory> m,
            memory::EpisodicMemory::open(s.model->config(), mo, {}));
  f.open_ms = ms_since(t_open);
  f.file_bytes_per_episode = double(fs::file_size(mo.path)) / double(count);
  KvRingAccess* ring = s.forward->kv_ring();
  const int64_t end = s.forward->position();
  KvBlock query, rows;
  std::vector<memory::RecallHit> hits;
  // A turn's input of 32 tokens, then the longest query recall_for_turn makes.
  f.long_query_tokens = std::min({kMaxRecall, ring->ring().n_window(), end});
  std::vector<memory::RecallHit> exact_hits;
  for (const int64_t q : {std::min<int64_t>(32, end), f.long_query_tokens}) {
    const bool long_query = q == f.long_query_tokens;
    for (int r = 0; r < 2 * reps; ++r) {
      // Fast and exact alternate (fast first on even pairs), so drift falls on both.
      const bool exact = (r / 2 + r) % 2 == 1;
      TurnTimes& t = exact ? (long_query ? f.exact_long_turn : f.exact_turn)
                           : (long_query ? f.long_turn : f.turn);
      m->set_exact_recall(exact);
      // What recall_for_turn does for a turn: read the input's rows, recall, place.
      const Clock::time_point t0 = Clock::now();
      INFER_TRY_VOID(ring->read_kv(end - q, q, &query));
      const double t_read = ms_since(t0);
      INFER_TRY_VOID(m->recall(query, size_t(mo.recall_tokens), &rows, &hits));
      const double t_recall = ms_since(t0);
      INFER_TRY_VOID(ring->set_recall(rows));
      const double total = ms_since(t0);
      if (r % 2 == 0) {
        exact_hits = hits;
      } else if (!same_picks(exact_hits, hits)) {
        ++f.differing;
      }
      const Clock::time_point t_commit = Clock::now();  // after the turn has its rows
      INFER_TRY_VOID(m->strengthen(hits));
      if (!long_query && !exact) {
        f.strengthen_ms.push_back(ms_since(t_commit));
        f.placed_tokens = rows.size();
      }
      const memory::RecallProfile& p = m->last_recall_profile();
      t.total_ms.push_back(total);
      t.recall_ms.push_back(t_recall);
      t.place_ms.push_back(total - t_recall);
      t.read_kv_ms.push_back(t_read);
      t.query_key_ms.push_back(p.query_key_ms);
      t.score_ms.push_back(p.score_ms);
      t.decode_ms.push_back(p.decode_ms);
      t.rescored = std::max(t.rescored, p.rescored);
    }
  }
  m->set_exact_recall(false);
  m.reset();
  fs::remove(mo.path);
  return f;
}

nlohmann::ordered_json ms_stats(const std::vector<double>& v) {
  return {{"median", percentile(v, 0.5)}, {"p99", percentile(v, 0.99)},
          {"max", percentile(v, 1.0)}};
}

// Medians of a turn's phases (they need not add up to the turn's median).
nlohmann::ordered_json phase_medians(const TurnTimes& t) {
  return {{"read_kv", percentile(t.read_kv_ms, 0.5)},
          {"query_key", percentile(t.query_key_ms, 0.5)},
          {"score", percentile(t.score_ms, 0.5)},
          {"decode", percentile(t.decode_ms, 0.5)},
          {"place", percentile(t.place_ms, 0.5)},
          {"rescored_fp32_max", t.rescored}};
}

void print_phases(const char* what, int64_t query_tokens, const TurnTimes& t) {
  std::fprintf(stderr,
               "bench-memory:   %s, %lld-token query: %.2f ms a turn: read_kv %.2f, query_key "
               "%.2f, score %.2f, decode %.2f, place %.2f (medians); at most %zu keys in fp32\n",
               what, (long long)query_tokens, percentile(t.total_ms, 0.5),
               percentile(t.read_kv_ms, 0.5), percentile(t.query_key_ms, 0.5),
               percentile(t.score_ms, 0.5), percentile(t.decode_ms, 0.5),
               percentile(t.place_ms, 0.5), t.rescored);
}

// bf16 K and V rows of every tiered layer, per token: what the store's coded rows replace.
size_t bf16_bytes_per_token(const ModelConfig& cfg) {
  size_t b = 0;
  for (const memory::TieredShape& t : memory::tiered_shapes(cfg)) b += 2 * 2 * size_t(t.row_floats());
  return b;
}

}  // namespace

Result<void> run_bench_memory(const Options& opts) {
  if (!opts.memory) {
    return Error{ErrorCode::kInvalidArgument, "--bench-memory needs --memory PATH (a scratch store)"};
  }
  const std::string path = opts.memory->string();
  if (fs::exists(path)) {
    return Error{ErrorCode::kInvalidArgument,
                 "--bench-memory: " + path + " exists; name a new file (the bench removes it)"};
  }
  const int64_t n = *opts.bench_memory;
  Result<void> r = [&]() -> Result<void> {
    INFER_TRY(std::unique_ptr<Session> s, open_session(opts, false));
    if (!s->pipeline.memory) {
      return Error{ErrorCode::kInvalidArgument, "--bench-memory: memory is off (--no-memory?)"};
    }
    INFER_TRY(DecodeFigures d, bench_decode(*s, n, 3));
    const memory::EpisodicMemory& src = *s->pipeline.memory->memory;
    const memory::StoreGeometry g = src.store().geometry();
    memory::MemoryOptions mo;
    mo.path = path;
    mo.episode_tokens = g.episode_tokens;
    mo.recall_tokens = uint32_t(s->pipeline.memory->recall_tokens);
    mo.recall_threads = s->pool ? s->pool->size() : 1;
    nlohmann::ordered_json recall = nlohmann::ordered_json::array();
    for (uint32_t count : {64u, 1000u, 10000u}) {
      INFER_TRY(RecallFigures f, bench_recall(*s, src, mo, count, 20));
      recall.push_back({{"episodes", f.episodes},
                        {"open_ms", f.open_ms},
                        {"file_bytes_per_episode", f.file_bytes_per_episode},
                        {"placed_tokens", f.placed_tokens},
                        {"query_tokens", 32},
                        {"turn_ms", ms_stats(f.turn.total_ms)},
                        {"score_decode_ms", ms_stats(f.turn.recall_ms)},
                        {"place_ms", ms_stats(f.turn.place_ms)},
                        {"phase_median_ms", phase_medians(f.turn)},
                        {"strengthen_commit_ms", ms_stats(f.strengthen_ms)},
                        {"long_query_tokens", f.long_query_tokens},
                        {"long_query_turn_ms", ms_stats(f.long_turn.total_ms)},
                        {"long_query_phase_median_ms", phase_medians(f.long_turn)},
                        {"exact_turn_ms", ms_stats(f.exact_turn.total_ms)},
                        {"exact_phase_median_ms", phase_medians(f.exact_turn)},
                        {"exact_long_query_turn_ms", ms_stats(f.exact_long_turn.total_ms)},
                        {"turns_differing_from_exact", f.differing}});
      std::fprintf(stderr,
                   "bench-memory: recall with %u episodes: %.2f ms a turn (median; %.2f with a "
                   "%lld-token query); every key in fp32: %.2f (%.2f); %zu turns differed\n",
                   count, percentile(f.turn.total_ms, 0.5), percentile(f.long_turn.total_ms, 0.5),
                   (long long)f.long_query_tokens, percentile(f.exact_turn.total_ms, 0.5),
                   percentile(f.exact_long_turn.total_ms, 0.5), f.differing);
      print_phases("coded first pass", 32, f.turn);
      print_phases("every key in fp32", 32, f.exact_turn);
      print_phases("coded first pass", f.long_query_tokens, f.long_turn);
      print_phases("every key in fp32", f.long_query_tokens, f.exact_long_turn);
    }
    const ModelConfig& cfg = s->model->config();
    const double off = percentile(d.off, 0.5), on = percentile(d.on, 0.5);
    nlohmann::ordered_json j;
    j["model_dir"] = s->choice.random_config.empty() ? s->choice.dir.string()
                                                     : s->choice.random_config.string();
    j["backend"] = s->backend_name;
    j["threads"] = s->threads.threads;
    j["decode_tokens_per_run"] = n;
    j["runs_each"] = 3;
    j["stream_capacity"] = s->stream_capacity;
    j["decode_ms_memory_off"] = ms_stats(d.off);
    j["decode_ms_memory_on"] = ms_stats(d.on);
    j["decode_cost_ratio"] = off > 0 ? on / off : 0.0;
    j["episodes_stored"] = d.episodes;
    j["tokens_dropped"] = d.dropped;
    j["recall"] = recall;
    j["episode_tokens"] = g.episode_tokens;
    j["payload_bytes_per_token"] = double(g.payload_bytes) / double(g.episode_tokens);
    j["key_bytes_per_token"] = double(g.key_floats) * 4.0 / double(g.episode_tokens);
    j["bf16_bytes_per_token"] = bf16_bytes_per_token(cfg);
    j["bf16_over_payload"] = double(bf16_bytes_per_token(cfg)) * double(g.episode_tokens) /
                             double(std::max<uint32_t>(g.payload_bytes, 1));
    INFER_TRY_VOID(write_bench_json(opts, j));
    std::fprintf(stderr,
                 "bench-memory: decode %.2f ms/token off, %.2f on (x%.3f), p99 on %.2f; %zu "
                 "episodes stored, %lld tokens dropped\n",
                 off, on, off > 0 ? on / off : 0.0, percentile(d.on, 0.99), d.episodes,
                 (long long)d.dropped);
    return Ok{};
  }();
  std::error_code ec;
  fs::remove(path, ec);
  return r;
}

}  // namespace infer::cli
