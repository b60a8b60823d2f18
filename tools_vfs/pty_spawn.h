// Starting and ending a PTY's child: a new pseudo-terminal pair, the program found on a fixed
// PATH, spawned as the leader of its own session with the terminal as its controlling tty, in a
// working directory held by fd (beneath ROOT), with a scrubbed environment; and the signals that
// end its whole session.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "tools_vfs/unique_fd.h"

namespace infer::tools {

// Searched for a program named without a '/'; nothing of the engine's own PATH is used.
inline constexpr const char* kPtyPath = "/usr/local/bin:/usr/bin:/bin";

struct PtySpawnRequest {
  std::vector<std::string> argv;  // argv[0] is the program: a name looked up on kPtyPath, or a
                                  // path with a '/' (relative to the working directory)
  int cwd_fd = -1;                // the working directory (an O_PATH fd beneath ROOT)
  std::string home;               // $HOME (ROOT's path)
  std::string term;               // $TERM
  std::vector<std::string> extra_env;  // "NAME=value", after (and over) the defaults
  uint16_t rows = 24;
  uint16_t cols = 80;
};

struct SpawnedPty {
  UniqueFd master;  // O_RDWR | O_NONBLOCK | O_CLOEXEC
  UniqueFd pidfd;   // invalid where pidfd_open is not available (then waitpid polls)
  pid_t pid = -1;   // also the child's process group and session id
};

// The environment a PTY child gets: PATH=kPtyPath, HOME, TERM, LANG=C.UTF-8, then extra_env
// (a later NAME= replaces an earlier one). Nothing is inherited.
Result<std::vector<std::string>> pty_environment(const PtySpawnRequest& req);

Result<SpawnedPty> spawn_pty(const PtySpawnRequest& req);

// Sends SIG to every process of session SID: its leader's process group, and (for SIGKILL) any
// other group of the session found in /proc (a shell's background jobs).
void signal_session(pid_t sid, int sig);

}  // namespace infer::tools
