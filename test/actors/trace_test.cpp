// --trace: the Chrome trace-event writer on its own (many threads, the size cap) and on a real
// session: the pipeline in process on a fixture (every actor's track, a token span per step,
// prefill chunk spans, spans nested per track), and build/infer --gpu in pipe mode on lavapipe
// (GPU submit and wait spans inside the token and prefill-chunk spans of their step).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "actors/chrome_trace.h"
#include "actors/pipeline.h"
#include "model/cpu_forward.h"
#include "test/actors/fixture_model.h"
#include "test/actors/recording_front_end.h"
#include "test/test_paths.h"

namespace infer::test {
namespace {

namespace fs = std::filesystem;
using actors::ChromeTrace;
using nlohmann::json;

struct Span {
  std::string name;
  int64_t t0 = 0, t1 = 0;  // ns
  int64_t arg = -1;
};

// A trace file's complete events, by track name.
struct Trace {
  json events;
  std::map<std::string, std::vector<Span>> tracks;

  std::vector<Span> named(const std::string& track, const std::string& name) const {
    std::vector<Span> out;
    if (auto it = tracks.find(track); it != tracks.end()) {
      for (const Span& s : it->second) {
        if (s.name == name) out.push_back(s);
      }
    }
    return out;
  }
};

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / (name + "-" + std::to_string(getpid()) + ".json");
}

// Parses the file (a JSON array); fails the test when it is not valid JSON.
Trace load_trace(const fs::path& path) {
  Trace t;
  t.events = json::parse(read_file(path), nullptr, false);
  EXPECT_FALSE(t.events.is_discarded()) << path << " is not valid JSON";
  EXPECT_TRUE(t.events.is_array());
  if (!t.events.is_array()) return t;
  std::map<int64_t, std::string> names;
  for (const json& e : t.events) {
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name") {
      names[e["tid"].get<int64_t>()] = e["args"]["name"].get<std::string>();
    }
  }
  for (const json& e : t.events) {
    if (e.value("ph", "") != "X") continue;
    const int64_t tid = e["tid"].get<int64_t>();
    EXPECT_TRUE(names.count(tid)) << "track " << tid << " has no thread_name";
    Span s;
    s.name = e["name"].get<std::string>();
    // ts and dur are µs with three decimals: whole ns.
    s.t0 = std::llround(e["ts"].get<double>() * 1000.0);
    s.t1 = s.t0 + std::llround(e["dur"].get<double>() * 1000.0);
    if (e.contains("args")) s.arg = e["args"]["arg"].get<int64_t>();
    t.tracks[names[tid]].push_back(s);
  }
  return t;
}

// On each track every two spans are disjoint or one contains the other (no partial overlap).
void expect_nested(const Trace& t) {
  for (auto [track, spans] : t.tracks) {
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
      return a.t0 != b.t0 ? a.t0 < b.t0 : a.t1 > b.t1;  // parents first
    });
    std::vector<Span> open;
    for (const Span& s : spans) {
      while (!open.empty() && open.back().t1 <= s.t0) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(s.t1, open.back().t1)
            << track << ": " << s.name << " [" << s.t0 << ", " << s.t1 << ") overlaps "
            << open.back().name << " [" << open.back().t0 << ", " << open.back().t1 << ")";
      }
      open.push_back(s);
    }
  }
}

// The spans of `inner` that lie within `outer`.
int count_within(const std::vector<Span>& inner, const Span& outer) {
  return int(std::count_if(inner.begin(), inner.end(), [&](const Span& s) {
    return s.t0 >= outer.t0 && s.t1 <= outer.t1;
  }));
}

TEST(ChromeTrace, SpansFromManyThreadsMakeOneValidFileAndTheCapDropsTheRest) {
  const fs::path path = temp_path("trace-threads");
  {
    auto trace = ChromeTrace::open(path, /*max_bytes=*/200 << 10);
    ASSERT_TRUE(trace.ok()) << trace.error().message;
    std::vector<std::thread> threads;
    const char* actors[] = {"a", "b\"quoted\\", "c", "d"};
    // Every track is named before the cap can be reached (a thread may finish before the next
    // one starts).
    for (const char* actor : actors) (*trace)->span(actor, "first", 0, 1, -1);
    for (const char* actor : actors) {
      threads.emplace_back([&, actor] {
        for (int i = 0; i < 2000; ++i) {
          const int64_t t = actors::steady_ns();
          (*trace)->span(actor, "work", t, t + 1000, i);
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_GT((*trace)->dropped(), 0);  // 8000 spans of ~120 bytes exceed 200 KiB
    EXPECT_LT((*trace)->dropped(), 8000);
  }  // the destructor closes the array
  const Trace t = load_trace(path);
  EXPECT_EQ(t.tracks.size(), 4u);
  EXPECT_TRUE(t.tracks.count("b\"quoted\\"));
  EXPECT_LE(fs::file_size(path), size_t(210) << 10);
  bool truncated = false;
  for (const json& e : t.events) truncated |= e.value("name", "") == "trace truncated";
  EXPECT_TRUE(truncated);
  fs::remove(path);
}

TEST(ChromeTrace, AnUnwritablePathIsAnError) {
  EXPECT_FALSE(ChromeTrace::open("/nonexistent-dir/trace.json").ok());
}

TEST(Trace, APipelineSessionTracesEveryActorTokenAndPrefillChunk) {
  ThreadPool pool(2);
  const Fixture f = load_fixture(fixture_dir("e2b-mini"), pool);
  ASSERT_NE(f.model, nullptr);
  const fs::path path = temp_path("trace-pipeline");
  auto trace = ChromeTrace::open(path);
  ASSERT_TRUE(trace.ok()) << trace.error().message;

  actors::PipelineOptions o;
  o.engine.sampling.temperature = 0.0f;
  o.engine.end_ids = {1};
  o.engine.max_positions = kMaxPositions;
  o.engine.prefill_chunk = 3;  // several chunks per turn
  o.tracer = trace->get();
  RecordingFrontEnd front;
  std::vector<actors::TurnEnd> ends;
  {
    actors::Pipeline p(std::make_shared<CpuForward>(*f.model, pool, kMaxPositions), o, front);
    for (int turn = 1; turn <= 2; ++turn) {
      const uint64_t n = p.send("", f.prompt, true, 6);
      auto end = front.wait_turn(n);
      ASSERT_TRUE(end.has_value());
      ends.push_back(*end);
    }
  }
  (*trace)->close();

  const Trace t = load_trace(path);
  for (const char* actor : {"io", "tokenizer", "stream", "gate", "consolidation"}) {
    EXPECT_TRUE(t.tracks.count(actor) && !t.tracks.at(actor).empty()) << actor;
  }
  int64_t generated = 0, steps = 0, prefilled = 0;
  for (const auto& e : ends) {
    generated += e.generated;
    // A step that samples the end id ends the turn without a token event.
    steps += e.generated + (e.reason == actors::StopReason::kEndToken ? 1 : 0);
    prefilled += e.prefilled;
  }
  ASSERT_GT(generated, 0);
  EXPECT_EQ(int64_t(t.named("stream", "token").size()), steps);
  EXPECT_EQ(int64_t(t.named("io", "token").size()), generated);
  EXPECT_EQ(int64_t(t.named("gate", "token").size()), generated);
  EXPECT_EQ(int64_t(t.named("stream", "turn").size()), 2);

  // Each prefill's chunks lie inside it and cover what it fed (arg: ids in the chunk).
  const auto prefills = t.named("stream", "prefill");
  const auto chunks = t.named("stream", "prefill chunk");
  ASSERT_EQ(prefills.size(), 2u);
  EXPECT_GE(chunks.size(), size_t(2 * (f.prompt.size() / 3)));
  int64_t chunked = 0;
  for (const Span& c : chunks) {
    EXPECT_GE(c.arg, 1);  // input is prefilled, even a lone leftover id
    EXPECT_LE(c.arg, 3);
    chunked += c.arg;
  }
  EXPECT_EQ(count_within(chunks, prefills[0]) + count_within(chunks, prefills[1]),
            int(chunks.size()));
  EXPECT_EQ(chunked, prefilled);
  expect_nested(t);
  fs::remove(path);
}

// build/infer --gpu in pipe mode with --trace on lavapipe. Without the validation layer: the
// GPU suite validates these same dispatches, and the layer's never-freed state, in a process
// that cannot pin it (test/gpu/gpu_test_env.cpp), fails LeakSanitizer in the ASan build. Without
// leak checking either: Debian 12's loader unloads lavapipe when the instance goes, leaving a
// 128-byte block of its own that LSan reports from an unknown module (test/cli/infer_cli_test.cpp
// infer_gpu says more); gpu_test checks our GPU code for leaks with the drivers pinned.
TEST(Trace, OnTheGpuSubmitAndWaitSpansNestInTheirStep) {
  const fs::path path = temp_path("trace-gpu"), err = temp_path("trace-gpu-stderr");
  const std::string cmd =
      "printf 'Hi\\n' | ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:verify_asan_link_order=0 '" +
      (build_dir() / "infer").string() + "' --gpu --model '" +
      (shared_fixtures() / "gemma4-text" / "e2b-vocab").string() +
      "' -n 3 --temperature 0 --trace '" + path.string() + "' > /dev/null 2> '" + err.string() +
      "'";
  const int status = std::system(cmd.c_str());
  const std::string log = read_file(err);
  ASSERT_EQ(status, 0) << log;

  const Trace t = load_trace(path);
  const auto tokens = t.named("stream", "token");
  const auto chunks = t.named("stream", "prefill chunk");
  const auto submits = t.named("stream", "gpu submit");
  const auto waits = t.named("stream", "gpu wait");
  ASSERT_FALSE(tokens.empty());
  ASSERT_FALSE(chunks.empty());
  // Step 0 samples the prefill's logits; every later step decodes the previous token: one
  // submit and one wait. Each prefill chunk is one submit and wait too.
  for (const Span& tok : tokens) {
    const int want = tok.arg == 0 ? 0 : 1;
    EXPECT_EQ(count_within(submits, tok), want) << "step " << tok.arg;
    EXPECT_EQ(count_within(waits, tok), want) << "step " << tok.arg;
  }
  for (const Span& c : chunks) {
    EXPECT_EQ(count_within(submits, c), 1);
    EXPECT_EQ(count_within(waits, c), 1);
  }
  EXPECT_EQ(submits.size(), tokens.size() - 1 + chunks.size());
  for (const Span& w : waits) EXPECT_GT(w.t1, w.t0);  // the fence wait takes time
  expect_nested(t);
  fs::remove(path);
  fs::remove(err);
}

}  // namespace
}  // namespace infer::test
