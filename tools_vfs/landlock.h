// Landlock (Linux >= 5.13): the subshell's child may write only beneath ROOT, and read or
// execute only beneath ROOT and a list of system directories (docs/TOOLS.md, "The subshell").
// The ruleset is built once in the parent from O_PATH fds; the child enforces it between fork
// and exec with two raw syscalls (async-signal-safe). Headers from linux-libc-dev, no library.
#pragma once

#include <string>
#include <vector>

#include "tools_vfs/unique_fd.h"

namespace infer::tools {

struct LandlockPolicy {
  // Read and execute (files and directory listings) beneath these; missing ones are skipped.
  std::vector<std::string> read_paths;
  // Read and write beneath these too (files such as /dev/null, or directories).
  std::vector<std::string> write_paths;
};

// The ABI version the kernel offers, 0 where it has no Landlock (or it is disabled).
int landlock_abi();

class LandlockRuleset {
 public:
  // ROOT_FD gets every right; POLICY adds the rest. Never fails: a kernel without Landlock or
  // a refused rule gives an inactive ruleset whose status() says why.
  static LandlockRuleset build(int root_fd, const LandlockPolicy& policy);
  // A ruleset that is deliberately not applied (the caller turned Landlock off).
  static LandlockRuleset off(std::string why);

  bool active() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  int abi() const { return abi_; }
  const std::string& status() const { return status_; }  // one line for logs and stderr

 private:
  UniqueFd fd_;
  int abi_ = 0;
  std::string status_;
};

// In the child, after fork: no_new_privs, then landlock_restrict_self. 0 or an errno.
// Async-signal-safe (raw syscalls only).
int landlock_enforce(int ruleset_fd);

}  // namespace infer::tools
