// LandlockRuleset: the access rights by ABI version, one path-beneath rule per directory, and
// the scopes (signals, abstract sockets) where the kernel has them.
#include "tools_vfs/landlock.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace infer::tools {
namespace {

// Debian 12's linux-libc-dev (6.1) stops at ABI 2; the later bits are fixed by the kernel ABI.
constexpr uint64_t kFsExecute = LANDLOCK_ACCESS_FS_EXECUTE;
constexpr uint64_t kFsWriteFile = LANDLOCK_ACCESS_FS_WRITE_FILE;
constexpr uint64_t kFsReadFile = LANDLOCK_ACCESS_FS_READ_FILE;
constexpr uint64_t kFsReadDir = LANDLOCK_ACCESS_FS_READ_DIR;
constexpr uint64_t kFsAbi1 = (uint64_t(1) << 13) - 1;            // EXECUTE .. MAKE_SYM
constexpr uint64_t kFsRefer = uint64_t(1) << 13;                 // ABI 2
constexpr uint64_t kFsTruncate = uint64_t(1) << 14;              // ABI 3
constexpr uint64_t kScopeAbstractUnixSocket = uint64_t(1) << 0;  // ABI 6
constexpr uint64_t kScopeSignal = uint64_t(1) << 1;              // ABI 6

// struct landlock_ruleset_attr as of ABI 6; the size passed tells the kernel which fields
// we fill (older kernels refuse a larger struct with non-zero fields they do not know).
struct RulesetAttr {
  uint64_t handled_access_fs = 0;
  uint64_t handled_access_net = 0;  // ABI 4: not handled, network stays open
  uint64_t scoped = 0;              // ABI 6
};

// Rights that apply to a file (the rest apply to directories only; a rule on a file with a
// directory right is EINVAL).
constexpr uint64_t kFileRights = kFsExecute | kFsWriteFile | kFsReadFile | kFsTruncate;

uint64_t handled_fs(int abi) {
  uint64_t fs = kFsAbi1;
  if (abi >= 2) fs |= kFsRefer;
  if (abi >= 3) fs |= kFsTruncate;
  return fs;
}

// 0 or an errno.
int add_rule(int ruleset_fd, int path_fd, uint64_t rights) {
  struct stat st {};
  if (::fstat(path_fd, &st) != 0) return errno;
  if (!S_ISDIR(st.st_mode)) rights &= kFileRights;
  landlock_path_beneath_attr attr{};
  attr.allowed_access = rights;
  attr.parent_fd = path_fd;
  if (::syscall(SYS_landlock_add_rule, ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, &attr, 0) != 0) {
    return errno;
  }
  return 0;
}

}  // namespace

int landlock_abi() {
  const long abi =
      ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi > 0 ? int(abi) : 0;
}

LandlockRuleset LandlockRuleset::off(std::string why) {
  LandlockRuleset out;
  out.status_ = std::move(why);
  return out;
}

LandlockRuleset LandlockRuleset::build(int root_fd, const LandlockPolicy& policy) {
  LandlockRuleset out;
  const long abi =
      ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi <= 0) {
    out.status_ = std::string("Landlock is not available (landlock_create_ruleset: ") +
                  std::strerror(errno) + "): the subshell's children are not confined to ROOT";
    return out;
  }
  out.abi_ = int(abi);
  const uint64_t all = handled_fs(out.abi_);
  const uint64_t read = kFsExecute | kFsReadFile | kFsReadDir;
  const uint64_t write = all;  // everything handled, beneath a write path
  RulesetAttr attr;
  attr.handled_access_fs = all;
  size_t attr_size = sizeof(uint64_t);
  if (out.abi_ >= 6) {
    attr.scoped = kScopeAbstractUnixSocket | kScopeSignal;
    attr_size = sizeof(RulesetAttr);
  }
  UniqueFd ruleset(int(::syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0)));
  if (!ruleset.valid()) {
    out.status_ = std::string("Landlock ruleset refused (") + std::strerror(errno) +
                  "): the subshell's children are not confined to ROOT";
    return out;
  }
  if (const int err = add_rule(ruleset.get(), root_fd, all); err != 0) {
    out.status_ = std::string("Landlock rule for ROOT refused (") + std::strerror(err) +
                  "): the subshell's children are not confined to ROOT";
    return out;
  }
  const auto add_paths = [&](const std::vector<std::string>& paths, uint64_t rights) {
    size_t n = 0;
    for (const std::string& path : paths) {
      UniqueFd fd(::open(path.c_str(), O_PATH | O_CLOEXEC));
      if (!fd.valid()) continue;  // a system directory this machine lacks (/lib32)
      if (add_rule(ruleset.get(), fd.get(), rights) == 0) ++n;
    }
    return n;
  };
  const size_t n_read = add_paths(policy.read_paths, read);
  const size_t n_write = add_paths(policy.write_paths, write);
  out.fd_ = std::move(ruleset);
  out.status_ = "Landlock ABI " + std::to_string(out.abi_) + ": writes confined to ROOT and " +
                std::to_string(n_write) + " more path(s), reads to ROOT, those and " +
                std::to_string(n_read) + " system path(s)" +
                (out.abi_ >= 6 ? "; signals and abstract sockets to its own processes" : "");
  return out;
}

int landlock_enforce(int ruleset_fd) {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (::syscall(SYS_landlock_restrict_self, ruleset_fd, 0) != 0) return errno;
  return 0;
}

}  // namespace infer::tools
