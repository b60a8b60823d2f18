// Subshell: opening ROOT, looking the program up, the environment, and one run: the plan for
// the child, the fork (subshell_spawn.cpp) and the wait (subshell_supervise.cpp).
#include "tools_vfs/subshell.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "tools_vfs/path_rules.h"
#include "tools_vfs/subshell_spawn.h"
#include "tools_vfs/subshell_supervise.h"

namespace infer::tools {
namespace {

Error io_error(const char* what) {
  return make_error(ErrorCode::kIo, std::string("subshell: ") + what + ": " + std::strerror(errno));
}

// The name before '=' in "NAME=value".
std::string_view env_name(std::string_view entry) { return entry.substr(0, entry.find('=')); }

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

const char* end_reason_name(EndReason reason) {
  switch (reason) {
    case EndReason::kExited:
      return "exited";
    case EndReason::kKilled:
      return "killed";
    case EndReason::kTimeout:
      return "timeout";
    case EndReason::kIdle:
      return "idle";
    case EndReason::kOutputLimit:
      return "output limit";
  }
  return "?";
}

Result<Subshell> Subshell::open(const std::string& root, SubshellOptions options) {
  for (const std::string& e : options.extra_env) {
    if (e.find('=') == std::string::npos || e.front() == '=' || e.find('\0') != std::string::npos) {
      return make_error(
          ErrorCode::kInvalidArgument,
          "subshell: extra_env entry \"" + printable_path(e) + "\" is not NAME=value");
    }
  }
  if (options.wall_timeout.count() <= 0 || options.idle_timeout.count() < 0 ||
      options.kill_grace.count() < 0 || options.drain_after_exit.count() < 0) {
    return make_error(ErrorCode::kInvalidArgument,
                      "subshell: timeouts must be >= 0 (and the wall timeout > 0)");
  }
  // pidfd_open and waitid(P_PIDFD) supervise the child without racing pid reuse.
  UniqueFd self_pidfd(int(::syscall(SYS_pidfd_open, ::getpid(), 0)));
  if (!self_pidfd.valid()) {
    return make_error(ErrorCode::kUnsupported, std::string("subshell: pidfd_open: ") +
                                                   std::strerror(errno) +
                                                   " (Linux 5.4 or later is needed)");
  }
  INFER_TRY(BeneathResolver resolver, BeneathResolver::open_root(root));
  char buf[PATH_MAX];
  const std::string fd_link = "/proc/self/fd/" + std::to_string(resolver.root_fd());
  const ssize_t n = ::readlink(fd_link.c_str(), buf, sizeof(buf) - 1);
  std::string root_path = n > 0 ? std::string(buf, size_t(n)) : root;

  LandlockRuleset landlock =
      options.landlock == LandlockMode::kOff
          ? LandlockRuleset::off(
                "Landlock is off by option: the subshell's children are "
                "not confined to ROOT")
          : LandlockRuleset::build(resolver.root_fd(), options.landlock_policy);
  if (!landlock.active()) std::fprintf(stderr, "infer: tools: %s\n", landlock.status().c_str());
  return Subshell(std::move(resolver), std::move(root_path), std::move(options),
                  std::move(landlock));
}

Result<std::string> Subshell::find_program(const std::string& name) const {
  if (name.find('/') != std::string::npos) return name;  // a path: exec'd from the cwd
  // Empty and relative PATH entries are skipped: a program is never found in the cwd by name.
  size_t start = 0;
  while (start <= options_.path.size()) {
    size_t end = options_.path.find(':', start);
    if (end == std::string::npos) end = options_.path.size();
    const std::string dir = options_.path.substr(start, end - start);
    if (!dir.empty() && dir.front() == '/' && is_executable_file(dir + "/" + name)) {
      return dir + "/" + name;
    }
    start = end + 1;
  }
  return make_error(ErrorCode::kNotFound, "subshell: command not found: \"" + printable_path(name) +
                                              "\" (PATH=" + options_.path + ")");
}

std::vector<std::string> Subshell::environment() const {
  // Nothing is inherited: a program sees these and the caller's extra_env, no more.
  std::vector<std::string> env = {
      "PATH=" + options_.path,
      "HOME=" + root_path_,
      "LANG=" + options_.lang,
      "TERM=dumb",
      "GIT_TERMINAL_PROMPT=0",
      "DEBIAN_FRONTEND=noninteractive",
      "PAGER=cat",
      "GIT_PAGER=cat",
  };
  for (const std::string& extra : options_.extra_env) {
    std::erase_if(env, [&](const std::string& e) { return env_name(e) == env_name(extra); });
    env.push_back(extra);
  }
  return env;
}

Result<SubshellResult> Subshell::run(const SubshellRequest& request) const {
  if (request.argv.empty() || request.argv[0].empty()) {
    return make_error(ErrorCode::kInvalidArgument, "subshell: no command");
  }
  for (const std::string& arg : request.argv) {
    if (arg.find('\0') != std::string::npos) {
      return make_error(ErrorCode::kInvalidArgument,
                        "subshell: an argument holds a NUL byte: \"" + printable_path(arg) + "\"");
    }
  }
  const std::string cwd = request.cwd.empty() ? "." : request.cwd;
  INFER_TRY(UniqueFd cwd_fd, resolver_.open(cwd, O_PATH | O_DIRECTORY));
  INFER_TRY(std::string exec_path, find_program(request.argv[0]));

  UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!dev_null.valid()) return io_error("open /dev/null");
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return io_error("pipe");
  UniqueFd out_read(fds[0]), out_write(fds[1]);
  UniqueFd err_read, err_write;
  if (!options_.merge_stderr) {
    if (::pipe2(fds, O_CLOEXEC) != 0) return io_error("pipe");
    err_read.reset(fds[0]);
    err_write.reset(fds[1]);
  }
  for (UniqueFd* fd : {&dev_null, &out_write, &err_write, &cwd_fd}) {
    if (fd->valid() && lift_above_stdio(*fd) != 0) return io_error("fcntl F_DUPFD_CLOEXEC");
  }
  for (const UniqueFd* fd : {&out_read, &err_read}) {
    if (fd->valid() && ::fcntl(fd->get(), F_SETFL, O_NONBLOCK) != 0) return io_error("fcntl");
  }

  SpawnPlan plan;
  plan.exec_path = std::move(exec_path);
  plan.argv = request.argv;
  plan.env = environment();
  plan.stdin_fd = dev_null.get();
  plan.stdout_fd = out_write.get();
  plan.stderr_fd = options_.merge_stderr ? out_write.get() : err_write.get();
  plan.cwd_fd = cwd_fd.get();
  plan.landlock_fd = landlock_.active() ? landlock_.fd() : -1;
  plan.max_processes = options_.max_processes;
  INFER_TRY(SpawnedChild child, spawn_child(plan));
  // Only the child may hold the write ends now, so EOF on a pipe means its side is closed.
  out_write.reset();
  err_write.reset();
  SubshellOptions limits = options_;
  if (request.wall_timeout.count() > 0) limits.wall_timeout = request.wall_timeout;
  SubshellResult result =
      supervise(std::move(child), std::move(out_read), std::move(err_read), limits);
  result.confined = landlock_.active();
  return result;
}

namespace {

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

}  // namespace

std::string render_result(const SubshellResult& r) {
  std::string head = "[command ";
  // For the ends we caused, the signal says whether SIGTERM sufficed or SIGKILL was needed.
  const std::string ended_by =
      r.term_signal != 0 ? " and was ended by " + signal_name(r.term_signal) : " and was ended";
  switch (r.reason) {
    case EndReason::kExited:
      head += "exited with code " + std::to_string(r.exit_code);
      break;
    case EndReason::kKilled:
      head += "was killed by " + signal_name(r.term_signal);
      break;
    case EndReason::kTimeout:
      head += "ran out of time" + ended_by;
      break;
    case EndReason::kIdle:
      head += "wrote nothing for too long" + ended_by;
      break;
    case EndReason::kOutputLimit:
      head += "wrote too much" + ended_by;
      break;
  }
  char secs[32];
  std::snprintf(secs, sizeof(secs), " after %.2f s]\n", r.elapsed_s);
  std::string out = head + secs;
  const auto stream = [&out](const char* name, const HeadTailBuffer& b) {
    out += std::string("[") + name + ": " + std::to_string(b.total_bytes()) + " bytes";
    if (b.dropped_bytes() > 0) out += ", middle dropped";
    out += "]\n";
    std::string text = b.text();
    if (!text.empty() && text.back() != '\n') text += '\n';
    out += text;
  };
  stream(r.merged ? "stdout and stderr" : "stdout", r.out);
  if (!r.merged) stream("stderr", r.err);
  return out;
}

}  // namespace infer::tools
