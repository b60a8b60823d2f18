// The subshell's fork and exec: everything the child needs is prepared in the parent (argv and
// environment arrays, fds, the Landlock ruleset), so that between fork and exec the child makes
// raw syscalls only (async-signal-safe, as a multithreaded parent requires). A failure before
// exec comes back through a close-on-exec pipe as the step and its errno.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "base/result.h"
#include "tools_vfs/unique_fd.h"

namespace infer::tools {

struct SpawnPlan {
  std::string exec_path;          // absolute, or relative to the working directory
  std::vector<std::string> argv;  // argv[0] as given
  std::vector<std::string> env;   // "NAME=value", the whole environment
  int stdin_fd = -1;              // each above 2: dup2 onto 0, 1, 2 in the child
  int stdout_fd = -1;
  int stderr_fd = -1;        // may equal stdout_fd (merged)
  int cwd_fd = -1;           // O_PATH directory beneath ROOT: fchdir
  int landlock_fd = -1;      // -1: not confined
  rlim_t max_processes = 0;  // RLIMIT_NPROC in the child; 0 leaves it
};

struct SpawnedChild {
  pid_t pid = 0;  // also its session and process group id (setsid)
  UniqueFd pidfd;
};

// Forks and execs PLAN. An Error when the child could not be set up or exec failed (it has
// exited and been reaped by then): "exec \"foo\": No such file or directory".
Result<SpawnedChild> spawn_child(const SpawnPlan& plan);

// Moves FD to a number above 2 (close-on-exec) so that dup2 onto 0-2 in the child never
// meets itself; 0 or an errno.
int lift_above_stdio(UniqueFd& fd);

}  // namespace infer::tools
