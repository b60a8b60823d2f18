// BeneathResolver: ROOT, the openat2 resolver and parent() (resolver_walk.cpp holds the walk).
#include "tools_vfs/resolver.h"

#include <fcntl.h>
#include <linux/openat2.h>  // struct open_how, RESOLVE_*: glibc 2.36 has no openat2 wrapper
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "tools_vfs/path_rules.h"
#include "tools_vfs/resolver_walk.h"

namespace infer::tools {
namespace {

// openat2 answers EAGAIN when a rename anywhere on the system raced its ".." checks; under a
// storm of renames (a build nearby) it can keep answering it, so after a few tries the call takes
// the walk, which gives the same guarantees without that check.
constexpr int kOpenat2Retries = 16;

long raw_openat2(int dirfd, const char* path, int flags) {
  open_how how{};
  how.flags = uint64_t(flags) | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  return syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

}  // namespace

const char* resolver_kind_name(ResolverKind kind) {
  switch (kind) {
    case ResolverKind::kAuto:
      return "auto";
    case ResolverKind::kOpenat2:
      return "openat2";
    case ResolverKind::kWalk:
      return "walk";
  }
  return "?";
}

Result<BeneathResolver> BeneathResolver::open_root(const std::string& root, ResolverKind kind) {
  UniqueFd fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) {
    const int err = errno;
    return make_error(
        err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInvalidArgument,
        "tools root \"" + printable_path(root) +
            "\" cannot be opened as a directory: " + errno_error(err, "open", root).message);
  }
  if (kind == ResolverKind::kWalk) return BeneathResolver(std::move(fd), kind);
  const long probe = raw_openat2(fd.get(), ".", O_PATH);
  if (probe >= 0) {
    ::close(int(probe));
    return BeneathResolver(std::move(fd), ResolverKind::kOpenat2);
  }
  const int err = errno;
  // ENOSYS: a kernel before 5.6; EPERM: a seccomp filter that does not know the call.
  if (kind == ResolverKind::kAuto && (err == ENOSYS || err == EPERM)) {
    return BeneathResolver(std::move(fd), ResolverKind::kWalk);
  }
  return errno_error(err, "openat2 probe on tools root", root);
}

Result<UniqueFd> BeneathResolver::open(std::string_view path, int flags) const {
  if ((flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE) {  // O_TMPFILE holds O_DIRECTORY
    return make_error(ErrorCode::kInternal, "BeneathResolver::open creates nothing: use parent()");
  }
  return kind_ == ResolverKind::kOpenat2 ? open_openat2(path, flags) : open_walk(path, flags);
}

Result<UniqueFd> BeneathResolver::open_openat2(std::string_view path, int flags) const {
  INFER_TRY(SplitPath split, split_path(path));  // the same refusals as the walk, before the kernel
  (void)split;
  const std::string text = path.empty() ? std::string(".") : std::string(path);
  for (int attempt = 0; attempt < kOpenat2Retries; ++attempt) {
    const long fd = raw_openat2(root_.get(), text.c_str(), flags);
    if (fd >= 0) return UniqueFd(int(fd));
    if (errno != EAGAIN) return errno_error(errno, "open", path);
  }
  return open_walk(path, flags);
}

Result<UniqueFd> BeneathResolver::open_walk(std::string_view path, int flags) const {
  return walk_beneath(root_.get(), path, flags);
}

Result<ParentAndName> BeneathResolver::parent(std::string_view path, bool follow_final) const {
  INFER_TRY(SplitPath split, split_path(path));
  std::vector<std::string> comps = std::move(split.components);
  bool must_be_dir = split.trailing_slash;
  for (int hops = 0;; ++hops) {
    if (comps.empty() || comps.back() == "..") {
      return make_error(
          ErrorCode::kInvalidArgument,
          "path \"" + printable_path(path) + "\" names no entry (ROOT itself or \"..\")");
    }
    const std::string parent_path = join_path(comps, comps.size() - 1);
    INFER_TRY(UniqueFd dir, open(parent_path, O_PATH | O_DIRECTORY));
    ParentAndName out{std::move(dir), comps.back(), join_path(comps, comps.size()), must_be_dir};
    if (!follow_final) return out;
    struct stat st {};
    if (::fstatat(out.dir.get(), out.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISLNK(st.st_mode)) {
      return out;  // absent (to be created) or not a link: the caller's *at call decides
    }
    if (hops >= kMaxSymlinkHops) return errno_error(ELOOP, "resolve", path);
    INFER_TRY(std::string target, read_link_beneath(out.dir.get(), out.name, path));
    INFER_TRY(SplitPath next,
              split_path(parent_path.empty() ? target : parent_path + "/" + target));
    comps = std::move(next.components);
    must_be_dir = next.trailing_slash;
  }
}

}  // namespace infer::tools
