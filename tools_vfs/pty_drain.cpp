// PtySet's drain thread: one poll(2) over the wake eventfd, every master (input, and output when
// input is queued) and every pidfd. Output is read as soon as it comes so that a child never
// blocks on a full terminal; an exited child is reaped (its output drained first); a closing
// PTY gets SIGKILL after its grace and is erased once reaped.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "tools_vfs/pty_spawn.h"
#include "tools_vfs/pty_state.h"

namespace infer::tools {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kReadChunkBytes = size_t(64) << 10;
constexpr int kReadsPerWake = 16;  // then the other PTYs get their turn
constexpr std::chrono::milliseconds kWaitpidPoll{50};  // without pidfds only
constexpr std::chrono::seconds kKillWait{5};  // after SIGKILL, before giving up on a reap

PtyStatus status_of(const siginfo_t& info) {
  PtyStatus s;
  s.running = false;
  if (info.si_code == CLD_EXITED) {
    s.exited = true;
    s.exit_code = info.si_status;
  } else {
    s.signal = info.si_status;
  }
  return s;
}

int ms_until(Clock::time_point t, Clock::time_point now) {
  if (t <= now) return 0;
  return int(std::chrono::ceil<std::chrono::milliseconds>(t - now).count());
}

}  // namespace

bool PtySet::drain_master(Pty& p, std::vector<PtyEvent>& events) {
  if (p.master_hup) return false;
  thread_local std::string buf(kReadChunkBytes, '\0');
  bool any = false;
  for (int i = 0; i < kReadsPerWake; ++i) {
    const ssize_t n = ::read(p.master.get(), buf.data(), buf.size());  // the fd is ours to close
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    std::lock_guard<std::mutex> lock(mu_);
    if (n <= 0) {  // EIO: the last process holding the terminal closed it
      p.master_hup = true;
      p.pending_input.clear();
      break;
    }
    const std::string_view bytes(buf.data(), size_t(n));
    p.raw.append(bytes);
    std::string text;
    p.stripper.feed(bytes, text);
    p.text.append(text);
    any = true;
  }
  if (any) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!p.closing) {
      events.push_back(PtyEvent{PtyEvent::Kind::kOutput, p.id, p.raw.end(), p.text.end(), p.status});
    }
  }
  return any;
}

void PtySet::flush_input(Pty& p) {
  while (!p.pending_input.empty() && !p.master_hup) {
    const ssize_t n = ::write(p.master.get(), p.pending_input.data(), p.pending_input.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;  // the terminal's input queue is full: POLLOUT
    if (n < 0) {
      p.pending_input.clear();  // EIO: nobody will read it
      return;
    }
    p.pending_input.erase(0, size_t(n));
  }
}

void PtySet::reap(Pty& p, std::vector<PtyEvent>& events) {
  if (p.reaped) return;
  // Output the child wrote before it exited is already in the terminal: make it readable first.
  // One round (up to 1 MiB, more than a terminal buffers): a background job that survives its
  // leader may write forever, and the loop goes on for it.
  drain_master(p, events);
  std::lock_guard<std::mutex> lock(mu_);  // held across the wait: close() must not signal a
                                          // pid that was just reaped (it may be reused)
  siginfo_t info{};
  int rc = 0;
  if (p.pidfd.valid()) {
    rc = ::waitid(idtype_t(P_PIDFD), id_t(p.pidfd.get()), &info, WEXITED | WNOHANG);
  } else {
    rc = ::waitid(P_PID, id_t(p.pid), &info, WEXITED | WNOHANG);
  }
  if (rc != 0 && errno == EINTR) return;  // the next wake-up tries again
  if (rc == 0 && info.si_pid == 0) return;  // still running (a spurious wake-up)
  p.reaped = true;
  if (rc == 0) {
    p.status = status_of(info);
  } else {  // ECHILD: someone else in this process waited for it; its status is lost
    p.status.running = false;
    p.status.signal = 0;
    p.status.exited = false;
  }
  if (!p.closing) {
    events.push_back(PtyEvent{PtyEvent::Kind::kExited, p.id, p.raw.end(), p.text.end(), p.status});
  }
}

// mu_ held. Returns true once the PTY can be erased.
bool PtySet::advance_closing(Pty& p, Clock::time_point now) {
  if (!p.reaped) {
    if (!p.killed && now >= p.kill_at) {
      signal_session(p.pid, SIGKILL);
      p.killed = true;
      p.give_up_at = now + kKillWait;
    } else if (p.killed && now >= p.give_up_at) {
      std::fprintf(stderr, "PTY %u: pid %d did not end %lld s after SIGKILL; left unreaped\n",
                   p.id, int(p.pid), static_cast<long long>(kKillWait.count()));
      return true;
    }
    return false;
  }
  // The leader is gone. If something still holds the terminal (a background job of its
  // session), kill it too: its session id cannot have been reused while it lives.
  if (!p.master_hup) signal_session(p.pid, SIGKILL);
  return true;
}

void PtySet::drain_loop() {
  std::vector<pollfd> fds;
  std::vector<std::pair<Pty*, bool>> owners;  // per fds[i + 1]: its PTY, and whether a pidfd
  for (;;) {
    int timeout_ms = -1;
    const auto shorten = [&](int ms) { timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms); };
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_ && ptys_.empty()) return;
      fds.assign(1, pollfd{wake_fd_.get(), POLLIN, 0});
      owners.clear();
      const auto now = Clock::now();
      for (auto& [id, p] : ptys_) {
        if (!p->master_hup) {
          const short out = p->pending_input.empty() ? 0 : POLLOUT;
          fds.push_back(pollfd{p->master.get(), short(POLLIN | out), 0});
          owners.emplace_back(p.get(), false);
        }
        if (!p->reaped && p->pidfd.valid()) {
          fds.push_back(pollfd{p->pidfd.get(), POLLIN, 0});
          owners.emplace_back(p.get(), true);
        } else if (!p->reaped) {
          shorten(int(kWaitpidPoll.count()));
        }
        if (p->closing) shorten(ms_until(p->killed ? p->give_up_at : p->kill_at, now));
      }
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
      std::perror("PTY drain thread: poll");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (fds[0].revents != 0) {
      uint64_t count = 0;
      (void)!::read(wake_fd_.get(), &count, sizeof count);
    }
    std::vector<PtyEvent> events;
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Pty& p = *owners[i - 1].first;
      if (owners[i - 1].second) {
        reap(p, events);
      } else {
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) drain_master(p, events);
        if (fds[i].revents & POLLOUT) {
          std::lock_guard<std::mutex> lock(mu_);
          flush_input(p);
        }
      }
    }
    {
      std::vector<Pty*> no_pidfd;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto& [id, p] : ptys_) {
          if (!p->reaped && !p->pidfd.valid()) no_pidfd.push_back(p.get());
        }
      }
      for (Pty* p : no_pidfd) reap(*p, events);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto now = Clock::now();
      for (auto it = ptys_.begin(); it != ptys_.end();) {
        if (it->second->closing && advance_closing(*it->second, now)) {
          events.push_back(PtyEvent{PtyEvent::Kind::kClosed, it->first, it->second->raw.end(),
                                    it->second->text.end(), it->second->status});
          it = ptys_.erase(it);  // closes its master and pidfd
        } else {
          ++it;
        }
      }
    }
    changed_.notify_all();  // output, an exit or an erase: waiters check their condition
    if (on_event_) {
      for (const PtyEvent& e : events) on_event_(e);
    }
  }
}

}  // namespace infer::tools
