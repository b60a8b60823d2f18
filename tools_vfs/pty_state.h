// PtySet::Pty: what the set keeps for one terminal; shared by pty_set.cpp (the calls) and
// pty_drain.cpp (the drain thread). Everything but the fds is guarded by PtySet::mu_; the fds
// are closed only by the drain thread, when it erases the entry.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "tools_vfs/ansi_strip.h"
#include "tools_vfs/pty_ring.h"
#include "tools_vfs/pty_set.h"

namespace infer::tools {

struct PtySet::Pty {
  explicit Pty(const PtyLimits& limits) : raw(limits.raw_ring_bytes), text(limits.text_ring_bytes),
                                 stripper(limits.max_line_bytes) {}

  PtyId id = 0;
  std::vector<std::string> argv;
  pid_t pid = -1;  // also its process group and session
  UniqueFd master;
  UniqueFd pidfd;  // invalid without pidfd_open: the drain thread then polls waitpid
  uint16_t rows = 0;
  uint16_t cols = 0;

  PtyRing raw;
  PtyRing text;
  AnsiStripper stripper;
  std::string pending_input;  // written by a caller, not yet taken by the terminal

  PtyStatus status;
  bool master_hup = false;  // the master read EIO: no process holds the terminal any more
  bool reaped = false;      // waited for: its pid may be reused, never signal it again
  bool closing = false;     // close() was called: the id is gone for callers
  bool killed = false;      // SIGKILL sent
  std::chrono::steady_clock::time_point kill_at;     // closing: SIGKILL then
  std::chrono::steady_clock::time_point give_up_at;  // killed: stop waiting then
};

}  // namespace infer::tools
