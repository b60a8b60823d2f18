// PtySet's life cycle: output kept after exit, a child exiting mid-read, a chatty child, less and
// a password prompt, resize, Ctrl-C, the environment, errors and shutdown.
#include "tools_vfs/pty_set.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "test/tools_vfs/pty_test_util.h"

namespace infer::tools {
namespace {

using namespace std::chrono_literals;
using test::open_pty;
using test::wait_exit;
using test::wait_raw;

// Resident memory of this process, from /proc/self/statm.
size_t rss_bytes() {
  std::ifstream in("/proc/self/statm");
  size_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * size_t(::sysconf(_SC_PAGESIZE));
}

// Processes of session SID that are not zombies, from /proc/*/stat.
size_t live_in_session(pid_t sid) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.empty() || name[0] < '1' || name[0] > '9') continue;
    std::ifstream in(e.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), {});
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    char state = 0;
    int ppid = 0, pgrp = 0, session = 0;
    if (std::sscanf(stat.c_str() + paren + 1, " %c %d %d %d", &state, &ppid, &pgrp, &session) == 4 &&
        session == sid && state != 'Z') {
      ++n;
    }
  }
  return n;
}

TEST(PtySet, LastOutputAndStatusStayAfterExit) {
  test::TempTree tree;
  std::mutex mu;
  std::condition_variable got_event;
  std::vector<PtyEvent> events;
  auto set = test::make_pty_set(tree, {}, [&](const PtyEvent& e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(e);
    got_event.notify_all();
  });
  ASSERT_TRUE(set);
  const PtyId id = open_pty(*set, {"sh", "-c", "printf '\\033[32mhello\\033[0m\\n'; exit 3"});
  const PtyStatus st = wait_exit(*set, id);
  EXPECT_TRUE(st.exited);
  EXPECT_EQ(st.exit_code, 3);
  auto raw = set->read_raw(id, 0, 1000);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->bytes, "\x1b[32mhello\x1b[0m\r\n");  // the terminal's ONLCR adds the \r
  auto text = set->read_text(id, 0, 1000);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->bytes, "hello\n");
  EXPECT_EQ(text->partial_line, "");
  EXPECT_FALSE(text->status.running);
  // Events follow the state they announce: the exit can be seen before its event has run.
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(got_event.wait_for(lock, 5s, [&] {
    return !events.empty() && events.back().kind == PtyEvent::Kind::kExited;
  }));
  EXPECT_GE(events.size(), 2u);  // output first (one event per read round), then the exit
  EXPECT_EQ(events.back().raw_end, raw->end);
  EXPECT_EQ(events.front().kind, PtyEvent::Kind::kOutput);
}

TEST(PtySet, ChildThatExitsMidReadLosesNothing) {
  test::TempTree tree;
  auto set = test::make_pty_set(tree);
  ASSERT_TRUE(set);
  const PtyId id = open_pty(*set, {"sh", "-c",
                                   "i=0; while [ $i -lt 2000 ]; do echo line$i; i=$((i+1)); "
                                   "done; exit 5"});
  std::string text;
  uint64_t next = 0;
  bool saw_running = false;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (;;) {  // small reads, while it writes and after it has gone
    auto r = set->read_text(id, next, 100);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->skipped, 0u);
    text += r->bytes;
    next = r->next;
    saw_running = saw_running || r->status.running;
    if (!r->status.running && r->next == r->end) {
      EXPECT_EQ(r->status.exit_code, 5);
      break;
    }
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    if (r->bytes.empty()) std::this_thread::sleep_for(1ms);
  }
  EXPECT_TRUE(saw_running);
  std::string expected;
  for (int i = 0; i < 2000; ++i) expected += "line" + std::to_string(i) + "\n";
  EXPECT_EQ(text, expected);
}

TEST(PtySet, ChattyChildNeverBlocksAndTheRingStaysBounded) {
  test::TempTree tree;
  PtyLimits limits;
  limits.raw_ring_bytes = 64 << 10;
  limits.text_ring_bytes = 16 << 10;
  auto set = test::make_pty_set(tree, limits);
  ASSERT_TRUE(set);
  const size_t rss_before = rss_bytes();
  const PtyId id = open_pty(*set, {"yes"});
  std::this_thread::sleep_for(500ms);  // nobody reads
  auto a = set->read_raw(id, 0, 1);
  std::this_thread::sleep_for(500ms);
  auto b = set->read_raw(id, 0, size_t(1) << 20);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GT(b->end, a->end) << "yes stopped: the drain thread fell behind or blocked";
  EXPECT_GT(b->end, uint64_t(4) * limits.raw_ring_bytes);
  EXPECT_EQ(b->bytes.size(), limits.raw_ring_bytes);
  EXPECT_EQ(b->skipped, b->end - limits.raw_ring_bytes);
  EXPECT_EQ(b->dropped_total, b->skipped);
  EXPECT_EQ(b->bytes.find_first_not_of("y\r\n"), std::string::npos) << "the ring holds yes's lines";
  EXPECT_NE(b->bytes.find("y\r\ny\r\n"), std::string::npos);
  auto t = set->read_text(id, 0, size_t(1) << 20);
  ASSERT_TRUE(t.ok());
  EXPECT_LE(t->bytes.size(), limits.text_ring_bytes);
  EXPECT_GT(t->dropped_total, 0u);
  EXPECT_EQ(t->bytes.substr(0, 4), "y\ny\n");
  EXPECT_LT(rss_bytes(), rss_before + (size_t(32) << 20)) << "memory grew with the output";
  std::printf("yes through a PTY: %.1f MB in 1 s, rings of %zu and %zu bytes\n", b->end / 1e6,
              limits.raw_ring_bytes, limits.text_ring_bytes);
  ASSERT_TRUE(set->close(id).ok());
  EXPECT_TRUE(set->wait_all_closed(5s));
}

TEST(PtySet, LessDoesNotHangTheSession) {
  test::TempTree tree;
  std::string lines;
  for (int i = 1; i <= 300; ++i) lines += "row " + std::to_string(i) + "\n";
  tree.file("big.txt", lines);
  auto set = test::make_pty_set(tree);
  ASSERT_TRUE(set);
  PtyOpenRequest req;
  req.argv = {"less", "big.txt"};
  req.rows = 10;
  req.extra_env = {"LESSHISTFILE=-"};
  auto id = set->open(req);
  ASSERT_TRUE(id.ok()) << id.error().message;
  wait_raw(*set, *id, "row 9");
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(set->read_raw(*id, 0, 10).ok());  // a read returns while less waits for a key
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 100ms);
  ASSERT_TRUE(set->write_key(*id, "space").ok());  // the next page
  wait_raw(*set, *id, "row 18");
  ASSERT_TRUE(set->write_key(*id, "down").ok());   // arrows in less's key mode
  wait_raw(*set, *id, "row 19");
  auto text = set->read_text(*id, 0, size_t(1) << 20);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->bytes.find("row 18\n"), std::string::npos) << text->bytes;
  EXPECT_EQ(text->bytes.find('\x1b'), std::string::npos) << "escapes left in the text";
  EXPECT_TRUE(set->status(*id)->running);
  ASSERT_TRUE(set->close(*id).ok());  // closed while it runs: no 'q' needed
  EXPECT_TRUE(set->wait_all_closed(5s));
  EXPECT_FALSE(set->status(*id).ok());
}

TEST(PtySet, PasswordPromptDoesNotHangTheSession) {
  test::TempTree tree;
  auto set = test::make_pty_set(tree);
  ASSERT_TRUE(set);
  const std::string script =
      "stty -echo; printf 'Password: '; read x; stty echo; echo; echo \"got ${#x} chars\"";
  // Unanswered: reads return the prompt, close ends it.
  const PtyId waiting = open_pty(*set, {"sh", "-c", script});
  wait_raw(*set, waiting, "Password: ");
  auto t = set->read_text(waiting, 0, 1000);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->partial_line, "Password: ");
  EXPECT_EQ(t->bytes, "");
  ASSERT_TRUE(set->close(waiting).ok());
  // Answered: the secret goes through and is not echoed.
  const PtyId answered = open_pty(*set, {"sh", "-c", script});
  wait_raw(*set, answered, "Password: ");
  ASSERT_TRUE(set->write(answered, "hunter2").ok());
  ASSERT_TRUE(set->write_key(answered, "enter").ok());
  const std::string raw = wait_raw(*set, answered, "got 7 chars");
  EXPECT_EQ(raw.find("hunter2"), std::string::npos) << raw;
  EXPECT_EQ(wait_exit(*set, answered).exit_code, 0);
  EXPECT_TRUE(set->wait_all_closed(5s));
}

TEST(PtySet, ResizeIsSeenByTheChild) {
  test::TempTree tree;
  auto set = test::make_pty_set(tree);
  ASSERT_TRUE(set);
  const PtyId id = open_pty(*set, {"sh", "-c",
                                   "stty size; trap 'stty size' WINCH; echo ready; "
                                   "while :; do sleep 0.02; done"},
                            24, 80);
  wait_raw(*set, id, "ready");
  EXPECT_NE(wait_raw(*set, id, "24 80").find("24 80"), std::string::npos);
  ASSERT_TRUE(set->resize(id, 30, 100).ok());
  wait_raw(*set, id, "30 100");  // printed by the SIGWINCH trap
  EXPECT_EQ(set->list().at(0).rows, 30);
  EXPECT_FALSE(set->resize(id, 0, 80).ok());
}

TEST(PtySet, CtrlCReachesTheForegroundGroup) {
  test::TempTree tree;
  auto set = test::make_pty_set(tree);
  ASSERT_TRUE(set);
  // sleep is a process of its own: if SIGINT reached only the shell, it would wait 100 s.
  const PtyId id = open_pty(*set, {"sh", "-c",
                                   "trap 'echo caught; exit 7' INT; echo ready; sleep 100; "
                                   "echo not-interrupted"});
  wait_raw(*set, id, "ready");
  std::this_thread::sleep_for(50ms);  // sleep has started
  ASSERT_TRUE(set->write_key(id, "ctrl-c").ok());
  const PtyStatus st = wait_exit(*set, id);
  EXPECT_EQ(st.exit_code, 7);
  const std::string raw = wait_raw(*set, id, "caught");
  EXPECT_EQ(raw.find("not-interrupted"), std::string::npos);
  // cat dies of it.
  const PtyId cat = open_pty(*set, {"cat"});
  ASSERT_TRUE(set->write(cat, "abc\r").ok());
  wait_raw(*set, cat, "abc\r\nabc\r\n");  // the echo, then cat's copy
  ASSERT_TRUE(set->write_key(cat, "ctrl-c").ok());
  EXPECT_EQ(wait_exit(*set, cat).signal, SIGINT);
}

TEST(PtySet, LeaderExitIsSeenWhileABackgroundJobFloodsAndCloseEndsTheJob) {
  test::TempTree tree;
  auto set = test::make_pty_set(tree);
  ASSERT_TRUE(set);
  // The job ignores the SIGHUP the kernel sends when the session leader exits, and keeps writing.
  const PtyId id = open_pty(*set, {"sh", "-c", "(trap '' HUP; exec yes) & sleep 0.1; exit 4"});
  const pid_t sid = set->list().at(0).pid;
  EXPECT_EQ(wait_exit(*set, id).exit_code, 4);
  const uint64_t end = set->read_raw(id, 0, 0)->end;
  std::this_thread::sleep_for(200ms);
  EXPECT_GT(set->read_raw(id, 0, 0)->end, end) << "the job's output is still drained";
  const PtyId other = open_pty(*set, {"sh", "-c", "echo other"});
  wait_raw(*set, other, "other");  // the drain thread serves the others meanwhile
  ASSERT_TRUE(set->close(id).ok());
  ASSERT_TRUE(set->wait_all_closed(5s));
  // Killed, it is reparented to init, which reaps it when it will: count the living only.
  const auto deadline = std::chrono::steady_clock::now() + 3s;
  while (live_in_session(sid) > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(live_in_session(sid), 0u) << "the job outlived close";
}

TEST(PtySet, SeveralAtOnce) {
  test::TempTree tree;
  auto set = test::make_pty_set(tree);
  ASSERT_TRUE(set);
  std::vector<PtyId> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(open_pty(*set, {"cat"}));
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(set->write(ids[i], "pty" + std::to_string(i) + "\r").ok());
  for (int i = 0; i < 8; ++i) {
    const std::string want = "pty" + std::to_string(i) + "\r\n";
    wait_raw(*set, ids[i], want + want);
    auto t = set->read_text(ids[i], 0, 1000);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t->bytes, "pty" + std::to_string(i) + "\npty" + std::to_string(i) + "\n");
  }
  EXPECT_EQ(set->list().size(), 8u);
  ASSERT_TRUE(set->write_key(ids[3], "ctrl-d").ok());  // EOF ends one cat
  EXPECT_TRUE(wait_exit(*set, ids[3]).exited);
  for (PtyId id : ids) ASSERT_TRUE(set->close(id).ok());
  EXPECT_TRUE(set->wait_all_closed(5s));
  EXPECT_TRUE(set->list().empty());
}

TEST(PtySet, EnvironmentIsScrubbedAndCwdIsBeneathRoot) {
  test::TempTree tree;
  tree.dir("sub");
  ::setenv("INFER_PTY_TEST_SECRET", "s3cr3t", 1);
  auto set = test::make_pty_set(tree);
  ASSERT_TRUE(set);
  PtyOpenRequest req;
  req.argv = {"sh", "-c", "env; pwd"};
  req.cwd = "sub";
  req.extra_env = {"EXTRA=1", "LANG=C"};
  auto id = set->open(req);
  ASSERT_TRUE(id.ok()) << id.error().message;
  wait_exit(*set, *id);
  const std::string text = set->read_text(*id, 0, 100000)->bytes;
  ::unsetenv("INFER_PTY_TEST_SECRET");
  EXPECT_EQ(text.find("s3cr3t"), std::string::npos) << text;
  EXPECT_NE(text.find("TERM=xterm-256color\n"), std::string::npos) << text;
  EXPECT_NE(text.find("PATH=/usr/local/bin:/usr/bin:/bin\n"), std::string::npos);
  EXPECT_NE(text.find("EXTRA=1\n"), std::string::npos);
  EXPECT_NE(text.find("LANG=C\n"), std::string::npos);
  EXPECT_EQ(text.find("LANG=C.UTF-8"), std::string::npos);  // replaced, not doubled
  EXPECT_NE(text.find("/sub\n"), std::string::npos) << text;
}

TEST(PtySet, BadRequestsAreClearErrors) {
  test::TempTree tree;
  tree.file("notexec", "x");
  PtyLimits limits;
  limits.max_ptys = 2;
  auto set = test::make_pty_set(tree, limits);
  ASSERT_TRUE(set);
  const auto open_err = [&](PtyOpenRequest req) {
    auto r = set->open(req);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.error().message;
  };
  EXPECT_NE(open_err({{"no-such-command-xyz"}}).find("not found"), std::string::npos);
  EXPECT_NE(open_err({{}}).find("argv is empty"), std::string::npos);
  EXPECT_NE(open_err({{"./notexec"}}).find("not an executable"), std::string::npos);
  EXPECT_FALSE(set->open({{"true"}, 24, 80, "../"}).ok());   // cwd above ROOT
  EXPECT_FALSE(set->open({{"true"}, 24, 80, "/tmp"}).ok());  // absolute cwd
  EXPECT_FALSE(set->open({{"true"}, 0, 80}).ok());
  EXPECT_FALSE(set->open({{"true"}, 24, 80, "", {"NOEQUALS"}}).ok());
  EXPECT_FALSE(set->open({{std::string("tr\0ue", 5)}}).ok());
  const PtyId a = open_pty(*set, {"cat"});
  const PtyId b = open_pty(*set, {"cat"});
  EXPECT_NE(open_err({{"cat"}}).find("limit is 2"), std::string::npos);
  EXPECT_FALSE(set->write(999, "x").ok());
  EXPECT_FALSE(set->write_key(a, "hyper-q").ok());
  EXPECT_FALSE(set->read_raw(a, 1 << 20, 10).ok());  // an offset past the end
  EXPECT_TRUE(set->close(a).ok());
  EXPECT_FALSE(set->close(a).ok());
  EXPECT_FALSE(set->read_text(a, 0, 10).ok());
  EXPECT_TRUE(set->status(b)->running);
}

TEST(PtySet, ShutdownEndsEveryChildEvenOneIgnoringHangups) {
  test::TempTree tree;
  PtyLimits limits;
  limits.close_grace = 200ms;
  auto set = test::make_pty_set(tree, limits);
  ASSERT_TRUE(set);
  open_pty(*set, {"sleep", "100"});
  open_pty(*set, {"sh", "-c", "sleep 100 & sleep 100"});
  const PtyId stubborn =
      open_pty(*set, {"sh", "-c", "trap '' HUP TERM; echo ready; while :; do sleep 0.02; done"});
  wait_raw(*set, stubborn, "ready");
  const auto t0 = std::chrono::steady_clock::now();
  set.reset();
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(took, 3s);
  EXPECT_GE(took, 150ms) << "the stubborn child should have needed SIGKILL after the grace";
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);  // no child left, reaped or not
  EXPECT_EQ(errno, ECHILD);
}

}  // namespace
}  // namespace infer::tools
