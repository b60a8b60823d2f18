// PtySet: the agent's persistent terminals (DESIGN.md §8, docs/TOOLS.md "PTYs"). Each PTY runs a
// program (argv) in its own session on a pseudo-terminal, in a working directory beneath ROOT,
// with a scrubbed environment. One background thread drains every master as soon as output
// arrives, whether anyone reads or not, into a bounded ring per PTY (raw bytes for clients) and,
// through AnsiStripper, a ring of plain text for the model. It also feeds queued input, reaps a
// child that exits (its last output stays readable with its status) and ends closed ones
// (SIGHUP + SIGTERM to the session, SIGKILL after a grace). The destructor ends and reaps every
// child and closes every fd. All calls are thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/result.h"
#include "tools_vfs/resolver.h"
#include "tools_vfs/unique_fd.h"

namespace infer::tools {

using PtyId = uint32_t;

struct PtyLimits {
  size_t max_ptys = 16;                        // open at once (exited but not closed count)
  size_t raw_ring_bytes = size_t(256) << 10;   // raw output kept per PTY
  size_t text_ring_bytes = size_t(64) << 10;   // stripped text kept per PTY
  size_t max_line_bytes = 4096;                // a longer line is cut (soft wrap) in the text
  size_t max_pending_input_bytes = size_t(64) << 10;  // written, not yet taken by the terminal
  size_t max_read_bytes = size_t(64) << 10;    // one read at most
  std::chrono::milliseconds close_grace{1000};  // SIGHUP/SIGTERM, then SIGKILL after this
  std::string term = "xterm-256color";          // $TERM (full-screen programs need one)
};

struct PtyOpenRequest {
  std::vector<std::string> argv;
  uint16_t rows = 24;
  uint16_t cols = 80;
  std::string cwd;                     // relative to ROOT; "" is ROOT
  std::vector<std::string> extra_env;  // "NAME=value", over the defaults
};

struct PtyStatus {
  bool running = true;
  bool exited = false;  // exit_code is set
  int exit_code = 0;
  int signal = 0;       // the signal that ended it, 0 if it exited
};

// What one read returns; offsets are per view (raw and text count separately).
struct PtyRead {
  std::string bytes;
  uint64_t from = 0;     // offset of bytes[0]
  uint64_t next = 0;     // pass this to the next read
  uint64_t skipped = 0;  // bytes between the offset asked for and `from`, dropped from the ring
  uint64_t end = 0;      // all output so far ends here (next < end: more to read)
  uint64_t dropped_total = 0;  // bytes this view has dropped since the PTY opened
  std::string partial_line;    // text view: the unfinished last line (a prompt), not consumed
  PtyStatus status;
};

struct PtyInfo {
  PtyId id = 0;
  std::vector<std::string> argv;
  pid_t pid = -1;
  uint16_t rows = 0;
  uint16_t cols = 0;
  uint64_t raw_end = 0;
  uint64_t text_end = 0;
  PtyStatus status;
};

// Raised on the drain thread after the bytes are readable, coalesced: one kOutput per read round
// of a PTY (up to 1 MiB), not one per byte; kExited after the last output. The callback must be
// quick and may call PtySet (no lock is held while it runs). No event is raised for a PTY after
// close() but its kClosed.
struct PtyEvent {
  enum class Kind { kOutput, kExited, kClosed } kind = Kind::kOutput;
  PtyId id = 0;
  uint64_t raw_end = 0;
  uint64_t text_end = 0;
  PtyStatus status;
};
using PtyEventCallback = std::function<void(const PtyEvent&)>;

class PtySet {
 public:
  static Result<std::unique_ptr<PtySet>> create(const std::string& root, PtyLimits limits = {},
                                                PtyEventCallback on_event = {});
  ~PtySet();
  PtySet(const PtySet&) = delete;
  PtySet& operator=(const PtySet&) = delete;

  Result<PtyId> open(const PtyOpenRequest& req);
  // Queues BYTES for the terminal (the drain thread feeds what it does not take at once).
  Result<void> write(PtyId id, std::string_view bytes);
  // Writes the bytes of a named key (pty_keys.h), in the cursor-key mode the program asked for.
  Result<void> write_key(PtyId id, std::string_view key_name);
  Result<PtyRead> read_raw(PtyId id, uint64_t from, size_t max_bytes) const;
  Result<PtyRead> read_text(PtyId id, uint64_t from, size_t max_bytes) const;
  // Sets the window size (TIOCSWINSZ; the kernel sends SIGWINCH to the foreground group).
  Result<void> resize(PtyId id, uint16_t rows, uint16_t cols);
  // Ends the PTY: the id is gone at once; its session gets SIGHUP + SIGTERM (+ SIGCONT), then
  // SIGKILL after close_grace; the drain thread reaps it and closes its fds.
  Result<void> close(PtyId id);
  Result<PtyStatus> status(PtyId id) const;
  std::vector<PtyInfo> list() const;

  // Waits until PTY ID's raw output passes AFTER, it exits, or TIMEOUT passes; returns its end.
  Result<uint64_t> wait_output(PtyId id, uint64_t after, std::chrono::milliseconds timeout) const;
  // Waits until every closed PTY is reaped and its fds closed (for tests and shutdown).
  bool wait_all_closed(std::chrono::milliseconds timeout) const;

 private:
  struct Pty;
  PtySet(BeneathResolver resolver, PtyLimits limits, PtyEventCallback on_event);
  Result<Pty*> find(PtyId id) const;  // mu_ held; closing PTYs are not found
  void wake() const;
  void close_locked(Pty& p);  // mu_ held
  void drain_loop();
  // The drain thread's steps (pty_drain.cpp).
  bool drain_master(Pty& p, std::vector<PtyEvent>& events);
  void flush_input(Pty& p);  // mu_ held
  void reap(Pty& p, std::vector<PtyEvent>& events);
  bool advance_closing(Pty& p, std::chrono::steady_clock::time_point now);  // mu_ held

  BeneathResolver resolver_;
  std::string root_path_;
  PtyLimits limits_;
  PtyEventCallback on_event_;
  UniqueFd wake_fd_;  // eventfd: open, write, close and shutdown wake the drain thread

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;  // output, exit or a finished close
  std::map<PtyId, std::unique_ptr<Pty>> ptys_;  // erased only by the drain thread
  PtyId next_id_ = 1;
  bool stopping_ = false;
  std::thread drainer_;
};

}  // namespace infer::tools
