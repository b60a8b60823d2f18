// PtySet: the calls (open, write, read, resize, close, status) and shutdown; the drain thread's
// loop is in pty_drain.cpp.
#include "tools_vfs/pty_set.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <termios.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "tools_vfs/pty_keys.h"
#include "tools_vfs/pty_spawn.h"
#include "tools_vfs/pty_state.h"

namespace infer::tools {
namespace {

std::string pty_name(PtyId id) { return "PTY " + std::to_string(id); }

Result<void> check_size(uint16_t rows, uint16_t cols) {
  if (rows == 0 || cols == 0) {
    return make_error(ErrorCode::kInvalidArgument,
                      "a terminal needs at least 1 row and 1 column (asked " +
                          std::to_string(rows) + "x" + std::to_string(cols) + ")");
  }
  return Ok{};
}

}  // namespace

Result<std::unique_ptr<PtySet>> PtySet::create(const std::string& root, PtyLimits limits,
                                               PtyEventCallback on_event) {
  if (limits.max_ptys == 0 || limits.raw_ring_bytes == 0 || limits.text_ring_bytes == 0 ||
      limits.max_line_bytes < 2 || limits.max_read_bytes == 0) {
    return make_error(ErrorCode::kInvalidArgument, "PTY limits must be positive");
  }
  INFER_TRY(BeneathResolver resolver, BeneathResolver::open_root(root));
  std::unique_ptr<PtySet> set(new PtySet(std::move(resolver), std::move(limits),
                                         std::move(on_event)));
  char resolved[PATH_MAX];
  set->root_path_ = ::realpath(root.c_str(), resolved) != nullptr ? resolved : root;
  set->wake_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!set->wake_fd_.valid()) {
    return make_error(ErrorCode::kIo, std::string("eventfd: ") + std::strerror(errno));
  }
  set->drainer_ = std::thread([s = set.get()] { s->drain_loop(); });
  return set;
}

PtySet::PtySet(BeneathResolver resolver, PtyLimits limits, PtyEventCallback on_event)
    : resolver_(std::move(resolver)), limits_(std::move(limits)), on_event_(std::move(on_event)) {}

PtySet::~PtySet() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& [id, p] : ptys_) {
      if (!p->closing) (void)close_locked(*p);
    }
  }
  wake();
  if (drainer_.joinable()) drainer_.join();  // returns once every PTY is reaped and erased
}

void PtySet::wake() const {
  const uint64_t one = 1;
  if (wake_fd_.valid()) (void)!::write(wake_fd_.get(), &one, sizeof one);
}

Result<PtySet::Pty*> PtySet::find(PtyId id) const {
  const auto it = ptys_.find(id);
  if (it == ptys_.end() || it->second->closing) {
    return make_error(ErrorCode::kNotFound, "no " + pty_name(id) + " (closed or never opened)");
  }
  return it->second.get();
}

Result<PtyId> PtySet::open(const PtyOpenRequest& req) {
  INFER_TRY_VOID(check_size(req.rows, req.cols));
  INFER_TRY(UniqueFd cwd, resolver_.open(req.cwd.empty() ? "." : req.cwd, O_PATH | O_DIRECTORY));
  PtySpawnRequest spawn;
  spawn.argv = req.argv;
  spawn.cwd_fd = cwd.get();
  spawn.home = root_path_;
  spawn.term = limits_.term;
  spawn.extra_env = req.extra_env;
  spawn.rows = req.rows;
  spawn.cols = req.cols;

  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return make_error(ErrorCode::kInvalidArgument, "the PTY set is shutting down");
  size_t open_now = 0;
  for (const auto& [id, p] : ptys_) open_now += p->closing ? 0 : 1;
  if (open_now >= limits_.max_ptys) {
    return make_error(ErrorCode::kInvalidArgument,
                      std::to_string(open_now) + " PTYs are open, the limit is " +
                          std::to_string(limits_.max_ptys) + ": close one first");
  }
  INFER_TRY(SpawnedPty spawned, spawn_pty(spawn));
  auto p = std::make_unique<Pty>(limits_);
  p->id = next_id_++;
  p->argv = req.argv;
  p->pid = spawned.pid;
  p->master = std::move(spawned.master);
  p->pidfd = std::move(spawned.pidfd);
  p->rows = req.rows;
  p->cols = req.cols;
  const PtyId id = p->id;
  ptys_.emplace(id, std::move(p));
  wake();  // the drain thread starts polling the new master and pidfd
  return id;
}

Result<void> PtySet::write(PtyId id, std::string_view bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  INFER_TRY(Pty * p, find(id));
  if (p->master_hup) {
    return make_error(ErrorCode::kIo, pty_name(id) + " has no terminal any more: its programs "
                                                     "have exited");
  }
  if (p->pending_input.size() + bytes.size() > limits_.max_pending_input_bytes) {
    return make_error(ErrorCode::kInvalidArgument,
                      pty_name(id) + ": " + std::to_string(p->pending_input.size()) +
                          " bytes are still waiting for the program to read them; " +
                          std::to_string(bytes.size()) + " more would pass the limit of " +
                          std::to_string(limits_.max_pending_input_bytes));
  }
  p->pending_input.append(bytes);
  flush_input(*p);
  if (!p->pending_input.empty()) wake();  // the drain thread feeds the rest on POLLOUT
  return Ok{};
}

Result<void> PtySet::write_key(PtyId id, std::string_view key_name) {
  bool app_keys = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    INFER_TRY(Pty * p, find(id));
    app_keys = p->stripper.application_cursor_keys();
  }
  INFER_TRY(std::string bytes, key_bytes(key_name, app_keys));
  return write(id, bytes);
}

Result<PtyRead> PtySet::read_raw(PtyId id, uint64_t from, size_t max_bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  INFER_TRY(const Pty* p, find(id));
  INFER_TRY(RingRead r, p->raw.read(from, std::min(max_bytes, limits_.max_read_bytes)));
  PtyRead out{std::move(r.bytes), r.from, r.next, r.skipped, r.end, p->raw.start(), {}, p->status};
  return out;
}

Result<PtyRead> PtySet::read_text(PtyId id, uint64_t from, size_t max_bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  INFER_TRY(const Pty* p, find(id));
  INFER_TRY(RingRead r, p->text.read(from, std::min(max_bytes, limits_.max_read_bytes)));
  PtyRead out{std::move(r.bytes), r.from,           r.next, r.skipped, r.end, p->text.start(),
              {},                 p->status};
  if (out.next == out.end) out.partial_line = p->stripper.current_line();
  return out;
}

Result<void> PtySet::resize(PtyId id, uint16_t rows, uint16_t cols) {
  INFER_TRY_VOID(check_size(rows, cols));
  std::lock_guard<std::mutex> lock(mu_);
  INFER_TRY(Pty * p, find(id));
  struct winsize ws {};
  ws.ws_row = rows;
  ws.ws_col = cols;
  if (::ioctl(p->master.get(), TIOCSWINSZ, &ws) != 0) {
    return make_error(ErrorCode::kIo, pty_name(id) + ": TIOCSWINSZ: " + std::strerror(errno));
  }
  p->rows = rows;
  p->cols = cols;
  return Ok{};
}

Result<void> PtySet::close(PtyId id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    INFER_TRY(Pty * p, find(id));
    close_locked(*p);
  }
  wake();
  return Ok{};
}

void PtySet::close_locked(Pty& p) {
  p.closing = true;
  p.kill_at = std::chrono::steady_clock::now() + limits_.close_grace;
  if (p.reaped) return;  // its pid may be reused: the drain thread erases it
  // SIGHUP ends a shell (an interactive one ignores SIGTERM), SIGTERM most programs; SIGCONT
  // lets a stopped one receive them.
  signal_session(p.pid, SIGHUP);
  signal_session(p.pid, SIGTERM);
  signal_session(p.pid, SIGCONT);
}

Result<PtyStatus> PtySet::status(PtyId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  INFER_TRY(const Pty* p, find(id));
  return p->status;
}

std::vector<PtyInfo> PtySet::list() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<PtyInfo> out;
  for (const auto& [id, p] : ptys_) {
    if (p->closing) continue;
    out.push_back(PtyInfo{id, p->argv, p->pid, p->rows, p->cols, p->raw.end(), p->text.end(),
                          p->status});
  }
  return out;
}

Result<uint64_t> PtySet::wait_output(PtyId id, uint64_t after,
                                     std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    INFER_TRY(const Pty* p, find(id));
    if (p->raw.end() > after || !p->status.running) return p->raw.end();
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
      INFER_TRY(const Pty* q, find(id));
      return q->raw.end();
    }
  }
}

bool PtySet::wait_all_closed(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return changed_.wait_for(lock, timeout, [&] {
    for (const auto& [id, p] : ptys_) {
      if (p->closing) return false;
    }
    return true;
  });
}

}  // namespace infer::tools
