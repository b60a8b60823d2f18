// What the subshell's child can reach (tools_vfs/subshell.h): a scrubbed environment, a working
// directory beneath ROOT (one escaping it is refused), stdin on /dev/null, no fd leaked over
// 100 runs and no zombie, and Landlock: writes outside ROOT fail where the kernel has it, and
// the subshell says on stderr when the child is not confined.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <string>

#include "test/tools_vfs/subshell_fixture.h"
#include "tools_vfs/landlock.h"
#include "tools_vfs/subshell.h"

namespace infer::tools {
namespace {

using namespace std::chrono_literals;
using test::SubshellTest;
using test::TempTree;

// The lines of TEXT, in order.
std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', start)) {
    out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

TEST_F(SubshellTest, TheEnvironmentIsScrubbed) {
  ASSERT_EQ(::setenv("INFER_TEST_SECRET", "hunter2", 1), 0);
  open_subshell({.extra_env = {"LANG=C", "CARGO_TERM_COLOR=never"}});
  SubshellResult r = run({"env"});
  ::unsetenv("INFER_TEST_SECRET");
  EXPECT_EQ(r.out.text().find("hunter2"), std::string::npos) << r.out.text();
  std::vector<std::string> env = lines(r.out.text());
  std::sort(env.begin(), env.end());
  const std::string root = tree_.base();
  char real_root[PATH_MAX];
  ASSERT_NE(::realpath(root.c_str(), real_root), nullptr);
  const std::vector<std::string> want = {
      "CARGO_TERM_COLOR=never",  // the caller's, by name
      "DEBIAN_FRONTEND=noninteractive",
      "GIT_PAGER=cat",
      "GIT_TERMINAL_PROMPT=0",
      std::string("HOME=") + real_root,
      "LANG=C",  // the caller's replaces the default C.UTF-8
      "PAGER=cat",
      "PATH=/usr/local/bin:/usr/bin:/bin",
      "TERM=dumb",
  };
  EXPECT_EQ(env, want);
}

TEST_F(SubshellTest, TheWorkingDirectoryIsBeneathRootAndEscapesAreRefused) {
  tree_.dir("sub");
  tree_.dir("sub/deeper");
  TempTree outside;
  tree_.link(outside.base(), "out_abs");
  tree_.link("../..", "sub/up2");
  open_subshell();
  char real_root[PATH_MAX];
  ASSERT_NE(::realpath(tree_.base().c_str(), real_root), nullptr);
  EXPECT_EQ(run({"pwd"}).out.text(), std::string(real_root) + "\n");
  EXPECT_EQ(run({"pwd"}, "sub/deeper").out.text(), std::string(real_root) + "/sub/deeper\n");
  EXPECT_EQ(run({"pwd"}, "sub/deeper/..").out.text(), std::string(real_root) + "/sub\n");
  for (const char* escape : {"..", "../", "sub/../..", "/tmp", "out_abs", "sub/up2"}) {
    auto r = subshell_->run({{"pwd"}, escape});
    ASSERT_FALSE(r.ok()) << escape << " ran in " << r->out.text();
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << escape << ": " << r.error().message;
  }
  EXPECT_EQ(subshell_->run({{"pwd"}, "missing"}).error().code, ErrorCode::kNotFound);
  tree_.file("plain", "x");
  EXPECT_FALSE(subshell_->run({{"pwd"}, "plain"}).ok());
}

TEST_F(SubshellTest, StdinIsClosedSoCatReturnsAtOnce) {
  open_subshell({.wall_timeout = 10'000ms, .idle_timeout = 0ms});
  SubshellResult r = run({"cat"});
  EXPECT_EQ(r.reason, EndReason::kExited);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out.total_bytes(), 0u);
  EXPECT_LT(r.elapsed_s, 1.0);
  // A prompt for a password reads EOF and gives up instead of waiting.
  SubshellResult prompt = run({"sh", "-c", "read answer; echo \"read=$?\""});
  EXPECT_EQ(prompt.out.text(), "read=1\n");
}

TEST_F(SubshellTest, HundredRunsLeakNoFdAndLeaveNoChild) {
  open_subshell();
  run({"true"});  // the first run may open what stays open (the dynamic loader's caches)
  const size_t before = open_fd_count();
  for (int i = 0; i < 100; ++i) {
    SubshellResult r = run({"sh", "-c", "echo $$; echo e >&2"});
    ASSERT_EQ(r.exit_code, 0);
  }
  EXPECT_EQ(open_fd_count(), before);
  // The child's fds: 0-2 only, even when the engine holds an fd without close-on-exec.
  const int inheritable = ::open("/dev/null", O_RDONLY);
  ASSERT_GE(inheritable, 0);
  SubshellResult fds = run({"ls", "/proc/self/fd"});
  ::close(inheritable);
  EXPECT_EQ(fds.out.text(), "0\n1\n2\n3\n") << "3 is ls's own directory fd";
  // Every child was reaped: this process has none left, not even a zombie.
  siginfo_t info{};
  errno = 0;
  EXPECT_EQ(::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST_F(SubshellTest, LandlockKeepsWritesInsideRootOrTheSubshellSaysItCannot) {
  TempTree outside;
  outside.file("secret.txt", "outside secret");
  const std::string target = outside.at("written.txt");
  testing::internal::CaptureStderr();
  open_subshell();
  const std::string said = testing::internal::GetCapturedStderr();
  if (landlock_abi() == 0) {
    // The kernel has no Landlock: the only acceptable outcome is that the subshell said so.
    EXPECT_FALSE(subshell_->landlock().active());
    EXPECT_NE(said.find("Landlock is not available"), std::string::npos) << said;
    return;
  }
  ASSERT_TRUE(subshell_->landlock().active()) << subshell_->landlock().status();
  EXPECT_EQ(said, "");
  SubshellResult out = run({"sh", "-c", "echo x > '" + target + "'"});
  EXPECT_NE(out.exit_code, 0);
  EXPECT_NE(out.err.text().find("Permission denied"), std::string::npos) << out.err.text();
  EXPECT_FALSE(outside.exists("written.txt"));
  EXPECT_TRUE(out.confined);
  SubshellResult in = run({"sh", "-c", "echo y > inside.txt && mkdir d && mv inside.txt d/"});
  EXPECT_EQ(in.exit_code, 0) << in.err.text();
  EXPECT_EQ(tree_.read("d/inside.txt"), "y\n");
  // Reads outside ROOT and the system directories fail too; /dev/null stays writable.
  SubshellResult read = run({"cat", outside.at("secret.txt")});
  EXPECT_NE(read.exit_code, 0);
  EXPECT_EQ(read.out.total_bytes(), 0u);
  EXPECT_EQ(run({"sh", "-c", "echo z > /dev/null && head -c 3 /etc/passwd"}).exit_code, 0);
}

TEST_F(SubshellTest, WithLandlockOffTheSameWriteSucceedsAndStderrSaysSo) {
  TempTree outside;
  const std::string target = outside.at("written.txt");
  testing::internal::CaptureStderr();
  open_subshell({.landlock = LandlockMode::kOff});
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("infer: tools: Landlock is off by option: the subshell's children are not "
                      "confined to ROOT"),
            std::string::npos)
      << said;
  SubshellResult r = run({"sh", "-c", "echo x > '" + target + "'"});
  EXPECT_EQ(r.exit_code, 0) << r.err.text();
  EXPECT_FALSE(r.confined);
  EXPECT_EQ(outside.read("written.txt"), "x\n");
}

}  // namespace
}  // namespace infer::tools
