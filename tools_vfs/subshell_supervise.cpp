// supervise: one poll loop over the pipes and the pidfd, driven by the nearest deadline.
#include "tools_vfs/subshell_supervise.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include "base/clock.h"

namespace infer::tools {
namespace {

using Ms = std::chrono::milliseconds;

// After SIGKILL a process dies at once unless it sits in uninterruptible sleep (a hung NFS
// read): past this we stop waiting and report it rather than hang the tools.
constexpr Ms kKillWait{5'000};
// How long we wait for the killed members of the group to die before reporting survivors.
// Dead, they are zombies until init (or a subreaper) reaps them, which is not ours to do and
// may take a while (one PID 1 we met reaps every 2 s), so "gone" means "no live member".
constexpr Ms kGroupGoneWait{2'000};
constexpr size_t kReadBytes = size_t(64) << 10;
constexpr int kReadsPerWake = 16;  // then the deadlines are checked again, however fast it writes

enum class Phase { kRunning, kTerminating, kKilling };

struct Stream {
  UniqueFd fd;
  HeadTailBuffer* capture;
};

int poll_timeout_ms(SteadyClock::time_point now, SteadyClock::time_point deadline) {
  if (deadline <= now) return 0;
  const auto ms = std::chrono::ceil<Ms>(deadline - now).count();
  return int(std::min<int64_t>(ms, 60'000));
}

// Processes of group PGID that are not zombies, by a scan of /proc/N/stat (fields after the
// command's closing parenthesis: state, ppid, pgrp).
size_t live_group_members(pid_t pgid) {
  if (::kill(-pgid, 0) != 0) return 0;  // ESRCH: none at all, zombies included
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return 1;  // cannot tell: assume one
  size_t live = 0;
  while (const dirent* d = ::readdir(proc)) {
    if (d->d_name[0] < '1' || d->d_name[0] > '9') continue;
    char path[300];  // "/proc/" + a name of up to 255 bytes + "/stat"
    std::snprintf(path, sizeof(path), "/proc/%s/stat", d->d_name);
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // gone since readdir
    char buf[512];
    const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
    ::close(fd);
    if (n <= 0) continue;
    buf[n] = '\0';
    const char* close_paren = std::strrchr(buf, ')');
    char state = 0;
    int ppid = 0;
    int pgrp = 0;
    if (close_paren == nullptr ||
        std::sscanf(close_paren + 1, " %c %d %d", &state, &ppid, &pgrp) != 3) {
      continue;
    }
    if (pgrp == pgid && state != 'Z' && state != 'X') ++live;
  }
  ::closedir(proc);
  return live;
}

void sleep_ms(int ms) {
  timespec ts{0, long(ms) * 1'000'000};
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

class Supervisor {
 public:
  Supervisor(SpawnedChild child, UniqueFd out, UniqueFd err, const SubshellOptions& options)
      : child_(std::move(child)), options_(options) {
    result_.pgid = child_.pid;
    result_.out = HeadTailBuffer(options.head_bytes, options.tail_bytes);
    result_.merged = !err.valid();
    if (!result_.merged) result_.err = HeadTailBuffer(options.head_bytes, options.tail_bytes);
    streams_[0] = Stream{std::move(out), &result_.out};
    streams_[1] = Stream{std::move(err), &result_.err};
  }

  SubshellResult run() {
    const auto start = SteadyClock::now();
    last_output_ = start;
    const auto wall_deadline = start + options_.wall_timeout;
    while (true) {
      const auto now = SteadyClock::now();
      std::optional<SteadyClock::time_point> deadline;
      if (!exited_) {
        if (phase_ == Phase::kRunning) {
          if (now >= wall_deadline) {
            end_group(EndReason::kTimeout, now);
            continue;
          }
          const auto idle_deadline = last_output_ + options_.idle_timeout;
          if (options_.idle_timeout.count() > 0 && now >= idle_deadline) {
            end_group(EndReason::kIdle, now);
            continue;
          }
          deadline = wall_deadline;
          if (options_.idle_timeout.count() > 0) deadline = std::min(wall_deadline, idle_deadline);
        } else if (phase_ == Phase::kTerminating) {
          if (now >= phase_deadline_) {
            kill_group(now);
            continue;
          }
          deadline = phase_deadline_;
        } else {
          if (now >= phase_deadline_) break;  // SIGKILL did not end it: report, stop waiting
          deadline = phase_deadline_;
        }
      } else {
        // Exited: read on while the rest of the group still holds a pipe, but not for long:
        // drain_after_exit, or what is left of the SIGTERM grace, or not at all after SIGKILL.
        if (phase_ == Phase::kKilling || !any_open() || now >= phase_deadline_) break;
        deadline = phase_deadline_;
      }
      wait_once(poll_timeout_ms(now, *deadline));
    }
    finish();
    result_.elapsed_s = seconds_since(start);
    return std::move(result_);
  }

 private:
  bool any_open() const { return streams_[0].fd.valid() || streams_[1].fd.valid(); }

  void end_group(EndReason reason, SteadyClock::time_point now) {
    reason_ = reason;
    if (options_.kill_grace.count() == 0) {
      kill_group(now);
      return;
    }
    ::kill(-child_.pid, SIGTERM);
    phase_ = Phase::kTerminating;
    phase_deadline_ = now + options_.kill_grace;
  }

  void kill_group(SteadyClock::time_point now) {
    ::kill(-child_.pid, SIGKILL);
    phase_ = Phase::kKilling;
    phase_deadline_ = now + kKillWait;
  }

  void wait_once(int timeout_ms) {
    pollfd fds[3];
    int n = 0;
    int stream_at[2] = {-1, -1};
    for (int s = 0; s < 2; ++s) {
      if (!streams_[s].fd.valid()) continue;
      stream_at[s] = n;
      fds[n++] = pollfd{streams_[s].fd.get(), POLLIN, 0};
    }
    const int pid_at = exited_ ? -1 : n;
    if (!exited_) fds[n++] = pollfd{child_.pidfd.get(), POLLIN, 0};
    if (::poll(fds, nfds_t(n), timeout_ms) < 0) return;  // EINTR: the loop comes back
    for (int s = 0; s < 2; ++s) {
      if (stream_at[s] >= 0 && fds[stream_at[s]].revents != 0) read_stream(streams_[s]);
    }
    if (pid_at >= 0 && fds[pid_at].revents != 0) note_exit();
  }

  void read_stream(Stream& stream) {
    char buf[kReadBytes];
    for (int i = 0; i < kReadsPerWake; ++i) {
      const ssize_t got = ::read(stream.fd.get(), buf, sizeof(buf));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && errno == EAGAIN) return;
      if (got <= 0) {  // EOF, or an error that will not go away
        stream.fd.reset();
        return;
      }
      stream.capture->append(std::string_view(buf, size_t(got)));
      total_bytes_ += uint64_t(got);
      last_output_ = SteadyClock::now();
      if (phase_ == Phase::kRunning && !exited_ && total_bytes_ > options_.max_output_bytes) {
        end_group(EndReason::kOutputLimit, last_output_);
      }
    }
  }

  // The child has exited: note how, without reaping it yet. Its zombie keeps its pid, which is
  // the group's id, from being reused while we still send signals to the group.
  void note_exit() {
    siginfo_t info{};
    if (::waitid(P_PIDFD, id_t(child_.pidfd.get()), &info, WEXITED | WNOWAIT | WNOHANG) != 0 ||
        info.si_pid == 0) {
      return;
    }
    exited_ = true;
    if (info.si_code == CLD_EXITED) {
      result_.exit_code = info.si_status;
    } else {
      result_.term_signal = info.si_status;
    }
    // Ended by our SIGTERM: the rest of the group keeps the grace it was given.
    if (phase_ == Phase::kRunning) phase_deadline_ = SteadyClock::now() + options_.drain_after_exit;
  }

  // Ends what is left of the group, keeps what is still in the pipes, reaps the child and
  // waits (bounded) until no process of its group is left.
  void finish() {
    ::kill(-child_.pid, SIGKILL);
    for (Stream& s : streams_) {
      if (s.fd.valid()) read_stream(s);
      s.fd.reset();
    }
    if (reason_) {
      result_.reason = *reason_;
    } else {
      result_.reason = result_.term_signal != 0 ? EndReason::kKilled : EndReason::kExited;
    }
    if (!exited_) {  // still alive after SIGKILL and kKillWait: reported, not reaped
      result_.group_survivors = true;
      return;
    }
    siginfo_t info{};
    while (::waitid(P_PIDFD, id_t(child_.pidfd.get()), &info, WEXITED) != 0 && errno == EINTR) {
    }
    child_.pidfd.reset();
    const auto gone_deadline = SteadyClock::now() + kGroupGoneWait;
    while (live_group_members(child_.pid) > 0 && SteadyClock::now() < gone_deadline) sleep_ms(2);
    result_.group_survivors = live_group_members(child_.pid) > 0;
  }

  SpawnedChild child_;
  const SubshellOptions& options_;
  SubshellResult result_;
  Stream streams_[2];
  Phase phase_ = Phase::kRunning;
  SteadyClock::time_point phase_deadline_{};
  SteadyClock::time_point last_output_{};
  std::optional<EndReason> reason_;
  bool exited_ = false;
  uint64_t total_bytes_ = 0;
};

}  // namespace

SubshellResult supervise(SpawnedChild child, UniqueFd out, UniqueFd err,
                         const SubshellOptions& options) {
  return Supervisor(std::move(child), std::move(out), std::move(err), options).run();
}

}  // namespace infer::tools
