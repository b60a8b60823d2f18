// 1,000 PTYs opened and closed: the count of open fds and of child processes must come back to
// where it started (issue 30, "What must be shown").
#include <dirent.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/clock.h"
#include "test/tools_vfs/pty_test_util.h"

namespace infer::tools {
namespace {

using namespace std::chrono_literals;

size_t count_entries(const char* dir_path) {
  DIR* dir = ::opendir(dir_path);
  if (dir == nullptr) return 0;
  size_t n = 0;
  while (const dirent* e = ::readdir(dir)) n += e->d_name[0] != '.';
  ::closedir(dir);
  return n;
}

// Open fds of this process (less the one opendir holds while counting).
size_t open_fds() { return count_entries("/proc/self/fd") - 1; }

// Children of every thread of this process (/proc/self/task/*/children), zombies included.
size_t child_processes() {
  size_t n = 0;
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return 0;
  while (const dirent* e = ::readdir(tasks)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(std::string("/proc/self/task/") + e->d_name + "/children");
    std::stringstream ss;
    ss << in.rdbuf();
    int pid = 0;
    while (ss >> pid) ++n;
  }
  ::closedir(tasks);
  return n;
}

TEST(PtyLifeCycle, ThousandOpensAndClosesLeaveNoFdAndNoChild) {
  test::TempTree tree;
  const size_t fds_before_set = open_fds();
  const size_t children_before = child_processes();
  {
    auto set = test::make_pty_set(tree);
    ASSERT_TRUE(set);
    const size_t fds_with_set = open_fds();
    const auto t0 = SteadyClock::now();
    size_t exited_before_close = 0;
    for (int i = 0; i < 1000; ++i) {
      // Half exit at once (reaped on their own), half run until closed (cat waits on input).
      const PtyId id = test::open_pty(*set, {i % 2 == 0 ? "true" : "cat"});
      ASSERT_NE(id, 0u) << "open " << i;
      if (i % 2 == 0) exited_before_close += !test::wait_exit(*set, id).running;
      ASSERT_TRUE(set->close(id).ok()) << "close " << i;
      if (i % 100 == 99) {
        ASSERT_TRUE(set->wait_all_closed(10s)) << "after " << i + 1;
      }
    }
    ASSERT_TRUE(set->wait_all_closed(10s));
    const double seconds = seconds_since(t0);
    std::printf("1,000 PTY opens and closes: %.2f s (%.2f ms each)\n", seconds, seconds);
    EXPECT_EQ(exited_before_close, 500u);
    EXPECT_EQ(open_fds(), fds_with_set);
    EXPECT_EQ(child_processes(), children_before);
    EXPECT_TRUE(set->list().empty());
  }
  EXPECT_EQ(open_fds(), fds_before_set);  // the set's eventfd and ROOT fd are gone too
  EXPECT_EQ(child_processes(), children_before);
  errno = 0;
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

}  // namespace
}  // namespace infer::tools
