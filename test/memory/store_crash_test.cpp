// EpisodeStore crash safety: a child commits in a loop and is SIGKILLed at random moments, 250
// times; every reopen holds exactly what the child saw committed (docs/MEMORY.md, "Commit
// protocol").
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "memory/episode_store.h"
#include "test/memory/store_fixture.h"

namespace infer::memory {
namespace {

// The child's log, one fixed-size message per write (atomic on a pipe).
struct Op {
  enum Kind : uint8_t { kAppend, kTouch, kForget } kind;
  uint8_t done;  // 0: about to run, 1: returned ok
  uint64_t id;
  uint64_t victim;
  float strength;
  int64_t recalled_ms;
  uint32_t recalls;
};
struct Live {
  float strength;
  int64_t recalled_ms;
  uint32_t recalls;
  bool operator==(const Live&) const = default;
};
using Model = std::map<uint64_t, Live>;

void apply_op(Model& m, const Op& op) {
  switch (op.kind) {
    case Op::kAppend:
      if (op.victim != 0) m.erase(op.victim);
      m[op.id] = Live{1.0f, 0, 0};
      break;
    case Op::kTouch: m[op.id] = Live{op.strength, op.recalled_ms, op.recalls}; break;
    case Op::kForget: m.erase(op.id); break;
  }
}

[[noreturn]] void crash_child(const std::string& p, const StoreGeometry& g, uint64_t seed, int fd) {
  auto r = EpisodeStore::open(p, g);
  if (!r.ok()) _exit(3);
  auto& s = *r;
  std::mt19937_64 rng(seed);
  auto send = [&](const Op& op) {
    if (write(fd, &op, sizeof op) != ssize_t(sizeof op)) _exit(4);
  };
  for (;;) {
    std::vector<uint64_t> live;
    for (const auto& info : s->list()) live.push_back(info.id);
    const uint32_t pick = uint32_t(rng() % 10);
    Op op{};
    if (live.empty() || pick < 6) {
      op.kind = Op::kAppend;
      op.id = s->next_id();
      op.victim = live.size() >= g.capacity ? live[rng() % live.size()] : 0;
      send(op);
      auto got = s->append(make_episode(op.id, g), op.victim);
      if (!got.ok() || *got != op.id) _exit(5);
    } else if (pick < 9) {
      op.kind = Op::kTouch;
      op.id = live[rng() % live.size()];
      op.strength = float(rng() % 1000) / 100.0f;
      op.recalled_ms = int64_t(rng() % 1'000'000);
      op.recalls = uint32_t(rng() % 50);
      send(op);
      if (!s->touch(op.id, op.strength, op.recalled_ms, op.recalls).ok()) _exit(6);
    } else {
      op.kind = Op::kForget;
      op.id = live[rng() % live.size()];
      send(op);
      if (!s->forget(op.id).ok()) _exit(7);
    }
    op.done = 1;
    send(op);
  }
}

// Forks a child that commits in a loop, SIGKILLs it after a random delay, reopens and checks that
// the store is exactly what the child saw committed (or that plus its one op in flight).
TEST_F(StoreTest, SurvivesSigkillAtRandomMoments) {
  StoreGeometry g = small_geometry();
  g.capacity = 16;
  g.payload_bytes = 512;
  const int kKills = 250;
  std::mt19937_64 rng(4242);
  Model model;
  int in_flight_committed = 0, in_flight_lost = 0;
  uint64_t total_ops = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int kill_no = 0; kill_no < kKills; ++kill_no) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(fds[0]);
      crash_child(path(), g, rng(), fds[1]);
    }
    close(fds[1]);
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 30000));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
    std::optional<Op> pending;
    Op op;
    ssize_t n;
    while ((n = ::read(fds[0], &op, sizeof op)) == ssize_t(sizeof op)) {
      if (op.done) {
        apply_op(model, op);
        pending.reset();
        ++total_ops;
      } else {
        pending = op;
      }
    }
    close(fds[0]);

    auto s = must_open(path(), g);
    ASSERT_TRUE(s);
    // A kill inside a header write leaves that page torn: reported, and the other page (the
    // state before the commit in flight) is used. Records are never damaged by a kill.
    for (const std::string& p : s->problems()) {
      EXPECT_NE(p.find("header page"), std::string::npos) << p;
    }
    Model actual;
    for (const EpisodeInfo& info : s->list()) {
      actual[info.id] = Live{info.strength, info.recalled_ms, info.recalls};
      auto e = s->read(info.id);
      ASSERT_TRUE(e.ok());
      ASSERT_TRUE(same_content(*e, info.id, g)) << "after kill " << kill_no;
    }
    if (actual != model) {
      ASSERT_TRUE(pending) << "after kill " << kill_no << ": committed state differs";
      Model after = model;
      apply_op(after, *pending);
      ASSERT_TRUE(actual == after) << "after kill " << kill_no << ": neither before nor after";
      model = after;
      ++in_flight_committed;
    } else if (pending) {
      ++in_flight_lost;
    }
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%d kills, %llu acknowledged commits, in-flight op committed %d / not %d, %.1f s\n",
              kKills, static_cast<unsigned long long>(total_ops), in_flight_committed,
              in_flight_lost, secs);
  EXPECT_GT(total_ops, uint64_t(kKills) / 2);
}

}  // namespace
}  // namespace infer::memory
