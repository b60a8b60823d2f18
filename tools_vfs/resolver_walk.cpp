// The walking resolver (resolver_walk.h). Every component is opened with O_PATH | O_NOFOLLOW
// relative to a directory fd already known to be beneath ROOT, so the kernel never follows a
// link for us; ".." pops our own stack of those fds and refuses to pop ROOT.
#include "tools_vfs/resolver_walk.h"

#include <fcntl.h>
#include <linux/magic.h>  // PROC_SUPER_MAGIC
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <deque>
#include <vector>

#include "tools_vfs/path_rules.h"

namespace infer::tools {

Result<std::string> read_link_beneath(int dir, const std::string& name, std::string_view path) {
  struct statfs fs {};
  if (::fstatfs(dir, &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC) {
    // /proc/self/{root,cwd,exe,fd/N} and kin: their text is not where they lead.
    return errno_error(ELOOP, "resolve", path);
  }
  char buf[PATH_MAX];
  const ssize_t n = ::readlinkat(dir, name.c_str(), buf, sizeof(buf));
  if (n < 0) return errno_error(errno, "readlink", path);
  if (size_t(n) >= sizeof(buf)) return errno_error(ENAMETOOLONG, "readlink", path);
  std::string target(buf, size_t(n));
  if (!target.empty() && target.front() == '/') {
    return escape_error(path, "a symbolic link in it points to an absolute path (\"" +
                                  printable_path(target) + "\")");
  }
  return target;
}

Result<UniqueFd> walk_beneath(int root_fd, std::string_view path, int flags) {
  INFER_TRY(SplitPath split, split_path(path));
  std::deque<std::string> pending(split.components.begin(), split.components.end());
  bool want_dir = split.trailing_slash;
  const bool follow_final = (flags & O_NOFOLLOW) == 0;
  std::vector<UniqueFd> dirs;  // directories below ROOT walked through; ROOT itself is depth 0
  auto top = [&] { return dirs.empty() ? root_fd : dirs.back().get(); };
  int hops = 0;
  while (!pending.empty()) {
    const std::string name = std::move(pending.front());
    pending.pop_front();
    const bool last = pending.empty();
    if (name == "..") {
      if (dirs.empty()) return escape_error(path, "\"..\" climbs above ROOT");
      dirs.pop_back();
      continue;
    }
    UniqueFd fd(::openat(top(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) return errno_error(errno, "open", path);
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return errno_error(errno, "stat", path);
    if (S_ISLNK(st.st_mode)) {
      if (last && !follow_final) {
        if ((flags & O_PATH) != 0) return fd;  // O_PATH | O_NOFOLLOW names the link itself
        return errno_error(ELOOP, "open", path);
      }
      if (++hops > kMaxSymlinkHops) return errno_error(ELOOP, "resolve", path);
      INFER_TRY(std::string target, read_link_beneath(top(), name, path));
      INFER_TRY(SplitPath expanded, split_path(target));
      if (last && expanded.trailing_slash) want_dir = true;
      pending.insert(pending.begin(), expanded.components.begin(), expanded.components.end());
      continue;
    }
    if (!last) {
      if (!S_ISDIR(st.st_mode)) return errno_error(ENOTDIR, "open", path);
      dirs.push_back(std::move(fd));
      continue;
    }
    if (want_dir && !S_ISDIR(st.st_mode)) return errno_error(ENOTDIR, "open", path);
    if ((flags & ~(O_NOFOLLOW | O_CLOEXEC)) == O_PATH) return fd;
    // Reopen by name with O_NOFOLLOW: if a link was swapped in since the fstat, this fails.
    UniqueFd opened(::openat(top(), name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC));
    if (!opened.valid()) return errno_error(errno, "open", path);
    return opened;
  }
  // The path ended on a directory reached by "..", or is ROOT itself.
  UniqueFd opened(::openat(top(), ".", flags | (want_dir ? O_DIRECTORY : 0) | O_CLOEXEC));
  if (!opened.valid()) return errno_error(errno, "open", path);
  return opened;
}

}  // namespace infer::tools
