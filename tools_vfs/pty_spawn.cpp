// spawn_pty: /dev/ptmx, then posix_spawn (a vfork-style clone: no copy of the engine's page
// tables, and exec failures come back as an error) with the child as a session leader opening
// the terminal, which makes it the controlling tty.
#include "tools_vfs/pty_spawn.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

namespace infer::tools {
namespace {

Error sys_error(int err, const std::string& what) {
  return make_error(ErrorCode::kIo, what + ": " + std::strerror(err));
}

bool has_nul(const std::string& s) { return s.find('\0') != std::string::npos; }

bool executable_file(int dir_fd, const std::string& path) {
  struct stat st {};
  if (::fstatat(dir_fd, path.c_str(), &st, 0) != 0 || !S_ISREG(st.st_mode)) return false;
  return ::faccessat(dir_fd, path.c_str(), X_OK, AT_EACCESS) == 0;
}

// The program to exec: a path with '/' as given (relative ones from the working directory, which
// the child enters before exec), a bare name searched on kPtyPath.
Result<std::string> find_program(const std::string& name, int cwd_fd) {
  if (name.find('/') != std::string::npos) {
    if (executable_file(name[0] == '/' ? AT_FDCWD : cwd_fd, name)) return name;
    return make_error(ErrorCode::kNotFound, "\"" + name + "\" is not an executable file");
  }
  std::string_view dirs = kPtyPath;
  while (!dirs.empty()) {
    const size_t colon = dirs.find(':');
    const std::string candidate = std::string(dirs.substr(0, colon)) + "/" + name;
    if (executable_file(AT_FDCWD, candidate)) return candidate;
    dirs = colon == std::string_view::npos ? std::string_view() : dirs.substr(colon + 1);
  }
  return make_error(ErrorCode::kNotFound,
                    "command \"" + name + "\" not found on " + std::string(kPtyPath));
}

struct FileActions {
  posix_spawn_file_actions_t fa;
  FileActions() { posix_spawn_file_actions_init(&fa); }
  ~FileActions() { posix_spawn_file_actions_destroy(&fa); }
};
struct SpawnAttr {
  posix_spawnattr_t attr;
  SpawnAttr() { posix_spawnattr_init(&attr); }
  ~SpawnAttr() { posix_spawnattr_destroy(&attr); }
};

// /proc/PID/stat's process group and session (the fields after the parenthesised name).
bool read_group_and_session(const char* pid_name, pid_t& pgrp, pid_t& sid) {
  const std::string path = std::string("/proc/") + pid_name + "/stat";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return false;
  char buf[512];
  const ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* close_paren = std::strrchr(buf, ')');
  if (close_paren == nullptr) return false;
  char state = 0;
  int ppid = 0, group = 0, session = 0;
  if (std::sscanf(close_paren + 1, " %c %d %d %d", &state, &ppid, &group, &session) != 4) {
    return false;
  }
  pgrp = group;
  sid = session;
  return true;
}

}  // namespace

Result<std::vector<std::string>> pty_environment(const PtySpawnRequest& req) {
  std::vector<std::string> env = {std::string("PATH=") + kPtyPath, "HOME=" + req.home,
                                  "TERM=" + req.term, "LANG=C.UTF-8"};
  for (const std::string& kv : req.extra_env) {
    const size_t eq = kv.find('=');
    if (eq == 0 || eq == std::string::npos || has_nul(kv)) {
      return make_error(ErrorCode::kInvalidArgument,
                        "environment entry \"" + kv.substr(0, 80) + "\" is not NAME=value");
    }
    const std::string_view name(kv.data(), eq + 1);
    std::erase_if(env, [&](const std::string& e) { return e.compare(0, name.size(), name) == 0; });
    env.push_back(kv);
  }
  return env;
}

Result<SpawnedPty> spawn_pty(const PtySpawnRequest& req) {
  if (req.argv.empty() || req.argv[0].empty()) {
    return make_error(ErrorCode::kInvalidArgument, "a PTY needs a command (argv is empty)");
  }
  for (const std::string& arg : req.argv) {
    if (has_nul(arg)) return make_error(ErrorCode::kInvalidArgument, "an argument holds a NUL byte");
  }
  INFER_TRY(const std::string program, find_program(req.argv[0], req.cwd_fd));
  INFER_TRY(const std::vector<std::string> env, pty_environment(req));

  SpawnedPty out;
  out.master.reset(::open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK));
  if (!out.master.valid()) return sys_error(errno, "open /dev/ptmx");
  if (::unlockpt(out.master.get()) != 0) return sys_error(errno, "unlockpt");
  char slave_path[64];
  if (::ptsname_r(out.master.get(), slave_path, sizeof slave_path) != 0) {
    return sys_error(errno, "ptsname");
  }
  struct winsize ws {};
  ws.ws_row = req.rows;
  ws.ws_col = req.cols;
  if (::ioctl(out.master.get(), TIOCSWINSZ, &ws) != 0) return sys_error(errno, "TIOCSWINSZ");
  struct termios tio {};
  if (::tcgetattr(out.master.get(), &tio) == 0) {
    tio.c_iflag |= IUTF8;  // backspace in canonical mode erases a whole UTF-8 character
    ::tcsetattr(out.master.get(), TCSANOW, &tio);
  }
  // Held until the child has it open: with no slave open the master reports a hangup.
  UniqueFd slave(::ioctl(out.master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!slave.valid()) return sys_error(errno, "TIOCGPTPEER");

  FileActions fa;
  SpawnAttr attr;
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  int rc = posix_spawn_file_actions_addfchdir_np(&fa.fa, req.cwd_fd);
  // Without O_NOCTTY: a session leader opening a terminal takes it as its controlling tty.
  if (rc == 0) rc = posix_spawn_file_actions_addopen(&fa.fa, 0, slave_path, O_RDWR, 0);
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(&fa.fa, 0, 1);
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(&fa.fa, 0, 2);
  if (rc == 0) rc = posix_spawn_file_actions_addclosefrom_np(&fa.fa, 3);  // close_range
  if (rc == 0) {
    rc = posix_spawnattr_setflags(&attr.attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF |
                                                  POSIX_SPAWN_SETSIGMASK);
  }
  if (rc == 0) rc = posix_spawnattr_setsigdefault(&attr.attr, &all);  // nothing stays ignored
  if (rc == 0) rc = posix_spawnattr_setsigmask(&attr.attr, &none);
  if (rc != 0) return sys_error(rc, "posix_spawn setup");

  std::vector<char*> argv_ptrs, env_ptrs;
  for (const std::string& a : req.argv) argv_ptrs.push_back(const_cast<char*>(a.c_str()));
  argv_ptrs.push_back(nullptr);
  for (const std::string& e : env) env_ptrs.push_back(const_cast<char*>(e.c_str()));
  env_ptrs.push_back(nullptr);
  rc = ::posix_spawn(&out.pid, program.c_str(), &fa.fa, &attr.attr, argv_ptrs.data(),
                     env_ptrs.data());
  if (rc != 0) return sys_error(rc, "exec \"" + program + "\"");
  // The raw syscall: glibc 2.36's <sys/pidfd.h> lacks extern "C". Its fd is O_CLOEXEC by
  // design; on ENOSYS (before Linux 5.3) the drain thread polls waitid instead.
  out.pidfd.reset(int(::syscall(SYS_pidfd_open, out.pid, 0)));
  return out;
}

void signal_session(pid_t sid, int sig) {
  if (sid <= 0) return;
  ::kill(-sid, sig);
  if (sig != SIGKILL) return;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return;
  while (const dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    pid_t pgrp = 0, session = 0;
    if (read_group_and_session(e->d_name, pgrp, session) && session == sid && pgrp != sid) {
      ::kill(pid_t(std::atoi(e->d_name)), SIGKILL);
    }
  }
  ::closedir(proc);
}

}  // namespace infer::tools
