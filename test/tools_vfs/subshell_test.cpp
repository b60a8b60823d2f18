// The subshell (tools_vfs/subshell.h): exit codes and signals, both streams, the wall-clock and
// no-output timeouts, the output cap with flat memory, a bounded fork bomb killed whole, and the
// head/tail capture itself. Every wait has a deadline; subshell_confinement_test.cpp holds
// the environment, cwd, stdin, fd and Landlock cases.
#include "tools_vfs/subshell.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "test/tools_vfs/subshell_fixture.h"

namespace infer::tools {
namespace {

using namespace std::chrono_literals;
using test::SubshellTest;

TEST(HeadTailBuffer, KeepsEverythingUnderTheCaps) {
  HeadTailBuffer b(4, 4);
  b.append("abc");
  b.append("defgh");
  EXPECT_EQ(b.head(), "abcd");
  EXPECT_EQ(b.tail(), "efgh");
  EXPECT_EQ(b.dropped_bytes(), 0u);
  EXPECT_EQ(b.text(), "abcdefgh");
}

TEST(HeadTailBuffer, KeepsTheHeadAndTheTailAndCountsTheRest) {
  HeadTailBuffer b(4, 5);
  for (char c = 'a'; c <= 'z'; ++c) b.append(std::string(1, c));
  EXPECT_EQ(b.head(), "abcd");
  EXPECT_EQ(b.tail(), "vwxyz");
  EXPECT_EQ(b.total_bytes(), 26u);
  EXPECT_EQ(b.dropped_bytes(), 17u);
  EXPECT_EQ(b.text(), "abcd\n[... 17 bytes dropped ...]\nvwxyz");
  b.append(std::string(100, '0') + "12345");  // one piece larger than the ring
  EXPECT_EQ(b.tail(), "12345");
  EXPECT_EQ(b.dropped_bytes(), 26u + 105u - 9u);
}

TEST(HeadTailBuffer, TextCutsOnlyOnUtf8Boundaries) {
  HeadTailBuffer b(4, 3);
  b.append("abc\xc3\xa9");  // the head ends inside "é"
  b.append(std::string(10, 'x'));
  b.append("\342\202\254z");  // the tail starts inside "€" (octal: "\xacz" is one escape)
  EXPECT_EQ(b.head(), "abc\xc3");
  EXPECT_EQ(b.tail(), "\202\254z");
  // Dropped: 10 x's and the 3 bytes of split characters; neither edge is left half-cut.
  EXPECT_EQ(b.text(), "abc\n[... 15 bytes dropped ...]\nz");
}

TEST_F(SubshellTest, ReportsExitCodesAndSignals) {
  open_subshell();
  SubshellResult ok = run({"true"});
  EXPECT_EQ(ok.reason, EndReason::kExited);
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_EQ(ok.term_signal, 0);
  SubshellResult three = run({"sh", "-c", "exit 3"});
  EXPECT_EQ(three.reason, EndReason::kExited);
  EXPECT_EQ(three.exit_code, 3);
  SubshellResult segv = run({"sh", "-c", "kill -SEGV $$"});
  EXPECT_EQ(segv.reason, EndReason::kKilled);
  EXPECT_EQ(segv.term_signal, SIGSEGV);
  EXPECT_EQ(segv.exit_code, -1);
  EXPECT_NE(render_result(segv).find("[command was killed by SIGSEGV after "), std::string::npos)
      << render_result(segv);
}

TEST_F(SubshellTest, KeepsStdoutAndStderrApartOrMergedInOrder) {
  open_subshell();
  SubshellResult apart = run({"sh", "-c", "echo out1; echo err1 >&2; echo out2"});
  EXPECT_EQ(apart.out.text(), "out1\nout2\n");
  EXPECT_EQ(apart.err.text(), "err1\n");
  EXPECT_FALSE(apart.merged);
  EXPECT_EQ(render_result(apart).substr(render_result(apart).find('\n') + 1),
            "[stdout: 10 bytes]\nout1\nout2\n[stderr: 5 bytes]\nerr1\n");
  open_subshell({.merge_stderr = true});
  SubshellResult merged = run({"sh", "-c", "echo out1; echo err1 >&2; echo out2"});
  EXPECT_TRUE(merged.merged);
  EXPECT_EQ(merged.out.text(), "out1\nerr1\nout2\n");
  EXPECT_EQ(merged.err.total_bytes(), 0u);
}

TEST_F(SubshellTest, ArgvIsPassedAsIsWithoutAShell) {
  open_subshell();
  // No shell: the metacharacters reach printf untouched.
  SubshellResult r = run({"printf", "%s|", "$HOME", "a b", "*", ";echo no"});
  EXPECT_EQ(r.out.text(), "$HOME|a b|*|;echo no|");
}

TEST_F(SubshellTest, Sleep100EndsWithinTheTimeoutPlusOneSecond) {
  open_subshell({.wall_timeout = 1000ms, .kill_grace = 1000ms});
  SubshellResult r = run({"sleep", "100"});
  EXPECT_EQ(r.reason, EndReason::kTimeout);
  EXPECT_EQ(r.term_signal, SIGTERM);  // sleep dies of the first signal, no SIGKILL needed
  EXPECT_GE(r.elapsed_s, 1.0);
  EXPECT_LT(r.elapsed_s, 2.0);
  EXPECT_FALSE(r.group_survivors);
  EXPECT_EQ(render_result(r).rfind("[command ran out of time and was ended by SIGTERM after 1.", 0),
            0u)
      << render_result(r);
  std::printf("sleep 100 with a 1 s timeout ended after %.3f s\n", r.elapsed_s);
}

TEST_F(SubshellTest, AGroupIgnoringSigtermIsKilledAfterTheGrace) {
  open_subshell({.wall_timeout = 300ms, .kill_grace = 300ms});
  SubshellResult r = run({"sh", "-c", "trap '' TERM; sleep 100"});
  EXPECT_EQ(r.reason, EndReason::kTimeout);
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_GE(r.elapsed_s, 0.6);
  EXPECT_LT(r.elapsed_s, 1.6);
  EXPECT_FALSE(r.group_survivors);
  EXPECT_EQ(live_members(r.pgid), 0u);
}

TEST_F(SubshellTest, SignalsTheEngineIgnoresOrBlocksAreResetForTheChild) {
  // An engine ignoring SIGPIPE and blocking SIGTERM (as servers and worker threads do) must not
  // hand that to the child: `yes | head` ends by SIGPIPE, and SIGTERM ends `sleep` at once.
  struct sigaction old_pipe {};
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGPIPE, &ignore, &old_pipe), 0);
  sigset_t term, old_mask;
  ::sigemptyset(&term);
  ::sigaddset(&term, SIGTERM);
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &term, &old_mask), 0);
  open_subshell({.wall_timeout = 500ms, .kill_grace = 2'000ms});
  SubshellResult piped = run({"sh", "-c", "yes | head -c 4"});
  SubshellResult slept = run({"sleep", "100"});
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ::sigaction(SIGPIPE, &old_pipe, nullptr);
  EXPECT_EQ(piped.exit_code, 0);
  EXPECT_EQ(piped.out.text(), "y\ny\n");
  EXPECT_EQ(piped.err.text(), "") << "yes saw EPIPE: SIGPIPE was left ignored";
  EXPECT_EQ(slept.reason, EndReason::kTimeout);
  EXPECT_EQ(slept.term_signal, SIGTERM) << "SIGTERM was left blocked: SIGKILL was needed";
  EXPECT_LT(slept.elapsed_s, 1.5);
}

TEST_F(SubshellTest, TheGroupKeepsTheGraceToCleanUpAfterTheCommandDies) {
  // The command dies of SIGTERM at once; a child of it traps SIGTERM, takes 0.2 s to clean up
  // and says so: its words arrive, and the call ends when it does, not at the end of the grace.
  open_subshell({.wall_timeout = 300ms, .kill_grace = 2'000ms});
  SubshellResult r = run(
      {"sh", "-c",
       "sh -c 'trap \"sleep 0.2; echo cleaned; exit 0\" TERM; while :; do sleep 0.05; done' & "
       "sleep 100"});
  EXPECT_EQ(r.reason, EndReason::kTimeout);
  EXPECT_EQ(r.term_signal, SIGTERM);
  EXPECT_EQ(r.out.text(), "cleaned\n");
  EXPECT_LT(r.elapsed_s, 1.5);
}

TEST_F(SubshellTest, TheNoOutputTimeoutEndsASilentCommand) {
  open_subshell({.wall_timeout = 10'000ms, .idle_timeout = 500ms, .kill_grace = 500ms});
  SubshellResult silent = run({"sh", "-c", "echo started; sleep 100"});
  EXPECT_EQ(silent.reason, EndReason::kIdle);
  EXPECT_EQ(silent.out.text(), "started\n");
  EXPECT_GE(silent.elapsed_s, 0.5);
  EXPECT_LT(silent.elapsed_s, 2.0);
  // Output now and then keeps it alive past the idle timeout: 6 lines 0.1 s apart.
  SubshellResult chatty = run({"sh", "-c", "for i in 1 2 3 4 5 6; do echo $i; sleep 0.1; done"});
  EXPECT_EQ(chatty.reason, EndReason::kExited);
  EXPECT_EQ(chatty.out.text(), "1\n2\n3\n4\n5\n6\n");
}

TEST_F(SubshellTest, YesStopsAtTheOutputCapWithFlatMemory) {
  constexpr uint64_t kCap = uint64_t(64) << 20;
  open_subshell({.wall_timeout = 20'000ms, .max_output_bytes = kCap});
  const long rss_before_kib = reset_peak_rss_and_read_rss_kib();
  ASSERT_LT(peak_rss_kib() - rss_before_kib, 1024) << "the peak RSS was not reset";
  SubshellResult r = run({"yes"});
  const long peak_kib = peak_rss_kib();
  EXPECT_EQ(r.reason, EndReason::kOutputLimit);
  EXPECT_GT(r.out.total_bytes(), kCap);
  EXPECT_LT(r.out.total_bytes(), kCap + (uint64_t(4) << 20));  // stopped near the cap
  EXPECT_EQ(r.out.head().size(), 16u << 10);
  EXPECT_EQ(r.out.tail().size(), 16u << 10);
  EXPECT_EQ(r.out.dropped_bytes(), r.out.total_bytes() - (32u << 10));
  EXPECT_EQ(r.out.head().substr(0, 6), "y\ny\ny\n");
  EXPECT_NE(r.out.text().find(" bytes dropped ...]\n"), std::string::npos);
  // 64 MiB went through; the process grew by at most the captures and read buffer (~100 KiB),
  // with slack for the allocator and the test's own strings.
  ASSERT_GT(rss_before_kib, 0);
  EXPECT_LT(peak_kib - rss_before_kib, 4 * 1024) << "peak " << peak_kib << " KiB";
  EXPECT_EQ(live_members(r.pgid), 0u);
  std::printf("yes: %llu bytes read in %.3f s, peak RSS %+ld KiB over %ld KiB before\n",
              static_cast<unsigned long long>(r.out.total_bytes()), r.elapsed_s,
              peak_kib - rss_before_kib, rss_before_kib);
}

TEST_F(SubshellTest, ABoundedForkBombIsKilledWhole) {
  // 15 shells in three levels of background children, each then sleeping 30 s: 30 processes,
  // never more. The timeout ends the group; none of it may survive the call.
  open_subshell({.wall_timeout = 800ms, .idle_timeout = 0ms, .kill_grace = 200ms});
  SubshellResult r =
      run({"sh", "-c",
           "f() { echo up; if [ $1 -gt 0 ]; then f $(($1 - 1)) & f $(($1 - 1)) & fi; sleep 30; }; "
           "f 3"});
  EXPECT_EQ(r.reason, EndReason::kTimeout);
  size_t ups = 0;
  for (size_t at = r.out.text().find("up"); at != std::string::npos;
       at = r.out.text().find("up", at + 1)) {
    ++ups;
  }
  EXPECT_EQ(ups, 15u) << r.out.text();  // the whole bomb was running before it was ended
  EXPECT_FALSE(r.group_survivors);
  EXPECT_EQ(live_members(r.pgid), 0u);  // at once: none of the 30 is running
  EXPECT_TRUE(group_is_gone(r.pgid));   // and once init has reaped them, none exists at all
  std::printf("fork bomb of 30 processes with a 0.8 s timeout ended after %.3f s\n", r.elapsed_s);
}

TEST_F(SubshellTest, BackgroundChildrenLeftByAnExitedCommandAreEnded) {
  open_subshell({.wall_timeout = 5'000ms, .drain_after_exit = 200ms});
  SubshellResult r = run({"sh", "-c", "sleep 30 & echo parent done"});
  EXPECT_EQ(r.reason, EndReason::kExited);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out.text(), "parent done\n");
  EXPECT_LT(r.elapsed_s, 2.0);  // the drain after exit, not the sleep
  EXPECT_FALSE(r.group_survivors);
  EXPECT_EQ(live_members(r.pgid), 0u);
}

TEST_F(SubshellTest, RunsFromSeveralThreadsAtOnceKeepTheirOwnOutput) {
  // run() is const and shares nothing: each thread's commands get their own pipes and results,
  // though each fork briefly copies the others' pipe ends (closed again at exec).
  open_subshell({.wall_timeout = 10'000ms});
  constexpr int kThreads = 4;
  constexpr int kRuns = 10;
  std::vector<std::string> wrong(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t, &wrong] {
      for (int i = 0; i < kRuns; ++i) {
        const std::string tag = std::to_string(t) + "-" + std::to_string(i);
        auto r = subshell_->run({{"sh", "-c", "echo $0; echo $0 >&2; exit 7", tag}, ""});
        if (!r.ok() || r->exit_code != 7 || r->out.text() != tag + "\n" ||
            r->err.text() != tag + "\n") {
          wrong[t] = tag + ": " + (r.ok() ? r->out.text() : r.error().message);
          return;
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(wrong[t], "") << "thread " << t;
}

TEST_F(SubshellTest, UnknownCommandsAndBadArgvAreErrorsNotCrashes) {
  open_subshell();
  auto missing = subshell_->run({{"no-such-command-for-infer"}, ""});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("command not found"), std::string::npos);
  EXPECT_EQ(subshell_->run({{}, ""}).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(subshell_->run({{std::string("ec\0ho", 5)}, ""}).error().code,
            ErrorCode::kInvalidArgument);
  tree_.file("data.txt", "not a program");
  auto not_exec = subshell_->run({{"./data.txt"}, ""});
  ASSERT_FALSE(not_exec.ok());
  EXPECT_NE(not_exec.error().message.find("exec: Permission denied"), std::string::npos)
      << not_exec.error().message;
  EXPECT_EQ(subshell_->run({{"./nothing-here"}, ""}).error().code, ErrorCode::kNotFound);
  EXPECT_FALSE(Subshell::open(tree_.base(), {.extra_env = {"NOEQUALS"}}).ok());
  EXPECT_FALSE(Subshell::open(tree_.base(), {.wall_timeout = 0ms}).ok());
  EXPECT_FALSE(Subshell::open(tree_.at("missing")).ok());
}

TEST_F(SubshellTest, MaxProcessesSetsTheChildsNprocLimit) {
  open_subshell({.max_processes = 77});
  const std::string limits = run({"grep", "Max processes", "/proc/self/limits"}).out.text();
  EXPECT_NE(limits.find(" 77 "), std::string::npos) << limits;
}

}  // namespace
}  // namespace infer::tools
