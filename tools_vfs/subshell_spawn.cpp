// spawn_child: fork, the child's setup in a fixed order, exec, and the error pipe.
#include "tools_vfs/subshell_spawn.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tools_vfs/landlock.h"

namespace infer::tools {
namespace {

// The steps of the child's setup, named in the error a failure brings back.
enum class Step : int { kSetsid, kSignals, kStdio, kChdir, kRlimit, kLandlock, kCloseFds, kExec };

const char* step_name(Step step) {
  switch (step) {
    case Step::kSetsid:
      return "setsid";
    case Step::kSignals:
      return "reset signals";
    case Step::kStdio:
      return "dup2 stdin/stdout/stderr";
    case Step::kChdir:
      return "fchdir to the working directory";
    case Step::kRlimit:
      return "setrlimit RLIMIT_NPROC";
    case Step::kLandlock:
      return "Landlock restrict_self";
    case Step::kCloseFds:
      return "close_range";
    case Step::kExec:
      return "exec";
  }
  return "?";
}

struct ChildFailure {
  int step;
  int err;
};

[[noreturn]] void fail(int error_fd, Step step, int err) {
  const ChildFailure f{int(step), err};
  [[maybe_unused]] const ssize_t n = ::write(error_fd, &f, sizeof(f));
  ::_exit(127);
}

// Between fork and exec: raw syscalls on memory prepared before the fork, nothing else.
[[noreturn]] void run_child(const SpawnPlan& plan, char* const* argv, char* const* envp,
                            int error_fd) {
  if (::setsid() < 0) fail(error_fd, Step::kSetsid, errno);
  // An ignored signal stays ignored across exec and a blocked one stays blocked: give the
  // program the defaults it expects (a parent ignoring SIGPIPE would break `yes | head`).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);  // EINVAL: fine
  }
  sigset_t none;
  ::sigemptyset(&none);
  if (::sigprocmask(SIG_SETMASK, &none, nullptr) != 0) fail(error_fd, Step::kSignals, errno);
  if (::dup2(plan.stdin_fd, 0) < 0 || ::dup2(plan.stdout_fd, 1) < 0 ||
      ::dup2(plan.stderr_fd, 2) < 0) {
    fail(error_fd, Step::kStdio, errno);
  }
  if (::fchdir(plan.cwd_fd) != 0) fail(error_fd, Step::kChdir, errno);
  if (plan.max_processes > 0) {
    const rlimit lim{plan.max_processes, plan.max_processes};
    if (::setrlimit(RLIMIT_NPROC, &lim) != 0) fail(error_fd, Step::kRlimit, errno);
  }
  if (plan.landlock_fd >= 0) {
    if (const int err = landlock_enforce(plan.landlock_fd); err != 0) {
      fail(error_fd, Step::kLandlock, err);  // fail closed: never run unconfined by surprise
    }
  }
  // Every fd above 2 is closed at exec (the error pipe stays usable until then). Older kernels
  // without CLOSE_RANGE_CLOEXEC (< 5.11) get FD_CLOEXEC set one fd at a time.
  if (::syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC) != 0) {
    rlimit nofile{};
    const rlim_t max_fd = ::getrlimit(RLIMIT_NOFILE, &nofile) == 0 ? nofile.rlim_cur : 65536;
    for (rlim_t fd = 3; fd < max_fd && fd < (rlim_t(1) << 20); ++fd) {
      ::fcntl(int(fd), F_SETFD, FD_CLOEXEC);
    }
  }
  ::execve(plan.exec_path.c_str(), argv, envp);
  fail(error_fd, Step::kExec, errno);
}

}  // namespace

int lift_above_stdio(UniqueFd& fd) {
  if (fd.get() > 2) return 0;
  const int lifted = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, 3);
  if (lifted < 0) return errno;
  fd.reset(lifted);
  return 0;
}

Result<SpawnedChild> spawn_child(const SpawnPlan& plan) {
  std::vector<char*> argv;
  for (const std::string& a : plan.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : plan.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  int error_pipe[2];
  if (::pipe2(error_pipe, O_CLOEXEC) != 0) {
    return make_error(ErrorCode::kIo, std::string("subshell: pipe: ") + std::strerror(errno));
  }
  UniqueFd error_read(error_pipe[0]);
  UniqueFd error_write(error_pipe[1]);

  const pid_t pid = ::fork();
  if (pid < 0) {
    return make_error(ErrorCode::kIo, std::string("subshell: fork: ") + std::strerror(errno));
  }
  if (pid == 0) run_child(plan, argv.data(), envp.data(), error_write.get());
  error_write.reset();

  // The pidfd first: the child is ours and unreaped, so its pid cannot name another process.
  UniqueFd pidfd(int(::syscall(SYS_pidfd_open, pid, 0)));
  const int pidfd_err = errno;

  // EOF: exec closed the pipe. A record: the step that failed and its errno.
  ChildFailure failure{};
  ssize_t n;
  do {
    n = ::read(error_read.get(), &failure, sizeof(failure));
  } while (n < 0 && errno == EINTR);
  if (n == 0 && pidfd.valid()) return SpawnedChild{pid, std::move(pidfd)};

  // Whatever went wrong, the child is ended and reaped here: it is no one else's to wait for.
  if (n != ssize_t(sizeof(failure))) ::kill(-pid, SIGKILL);  // it may have exec'd
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (n == ssize_t(sizeof(failure))) {
    const Step step = Step(failure.step);
    const ErrorCode code =
        step == Step::kExec && failure.err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo;
    return make_error(code, "subshell: \"" + plan.exec_path + "\": " + step_name(step) + ": " +
                                std::strerror(failure.err));
  }
  if (n == 0) {  // exec'd, but no pidfd to supervise it with (Linux < 5.3)
    return make_error(ErrorCode::kUnsupported, std::string("subshell: pidfd_open: ") +
                                                   std::strerror(pidfd_err) +
                                                   " (Linux 5.4 or later is needed)");
  }
  return make_error(ErrorCode::kIo,
                    "subshell: \"" + plan.exec_path + "\": the child's setup report was cut short");
}

}  // namespace infer::tools
