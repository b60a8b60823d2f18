// SubshellTest: a Subshell on a fresh ROOT, a run() that fails the test on an Error, and the
// process measurements the subshell tests share (RSS, open fds, the child's process group).
#pragma once

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <time.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "test/tools_vfs/temp_tree.h"
#include "tools_vfs/subshell.h"

namespace infer::tools::test {

class SubshellTest : public ::testing::Test {
 protected:
  void open_subshell(SubshellOptions options = {}) {
    subshell_.reset();
    auto s = Subshell::open(tree_.base(), std::move(options));
    ASSERT_TRUE(s.ok()) << s.error().message;
    subshell_.emplace(std::move(s).value());
  }
  SubshellResult run(std::vector<std::string> argv, std::string cwd = "") {
    auto r = subshell_->run({std::move(argv), std::move(cwd)});
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? std::move(r).value() : SubshellResult{};
  }

  // Processes of group PGID still running (zombies not counted), from /proc/N/stat. Written
  // here again rather than taken from the library, so the test does not trust what it tests.
  static size_t live_members(pid_t pgid) {
    size_t live = 0;
    DIR* proc = ::opendir("/proc");
    if (proc == nullptr) return 1;
    while (const dirent* d = ::readdir(proc)) {
      if (d->d_name[0] < '1' || d->d_name[0] > '9') continue;
      std::ifstream in(std::string("/proc/") + d->d_name + "/stat");
      std::string stat((std::istreambuf_iterator<char>(in)), {});
      const size_t paren = stat.rfind(')');
      if (paren == std::string::npos) continue;
      char state = 0;
      int ppid = 0, pgrp = 0;
      if (std::sscanf(stat.c_str() + paren + 1, " %c %d %d", &state, &ppid, &pgrp) != 3) continue;
      if (pgrp == pgid && state != 'Z') ++live;
    }
    ::closedir(proc);
    return live;
  }

  // No process at all is left in group PGID (kill(-PGID, 0) fails with ESRCH). Killed members
  // stay zombies until init reaps them, and one PID 1 we met reaps every 2 s: wait up to 5 s.
  static bool group_is_gone(pid_t pgid) {
    for (int i = 0; i < 2500; ++i) {
      if (::kill(-pgid, 0) != 0 && errno == ESRCH) return true;
      timespec ts{0, 2'000'000};
      ::nanosleep(&ts, nullptr);
    }
    return false;
  }

  // A field of /proc/self/status in KiB ("VmRSS", "VmHWM"), -1 if absent.
  static long status_kib(const std::string& field) {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
    }
    return -1;
  }
  // Resets the peak RSS (clear_refs "5", Linux >= 4.0) and returns the RSS now.
  static long reset_peak_rss_and_read_rss_kib() {
    std::ofstream("/proc/self/clear_refs") << "5";
    return status_kib("VmRSS");
  }
  static long peak_rss_kib() { return status_kib("VmHWM"); }

  static size_t open_fd_count() {
    size_t n = 0;
    if (DIR* d = ::opendir("/proc/self/fd")) {
      while (::readdir(d) != nullptr) ++n;
      ::closedir(d);
    }
    return n;
  }

  TempTree tree_;
  std::optional<Subshell> subshell_;
};

}  // namespace infer::tools::test
