// BeneathResolver: opens paths beneath ROOT and nowhere else (docs/TOOLS.md). Two ways, one
// contract: openat2(2) with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS where the kernel has it, and
// a walk one component at a time with O_NOFOLLOW that expands symbolic links itself where it
// does not (ENOSYS, or a seccomp filter's EPERM), or for one call when openat2 keeps answering
// EAGAIN (renames elsewhere on the system racing its ".." checks). Both refuse absolute paths,
// absolute link targets, ".." above ROOT (even if a later component would come back) and /proc
// magic links.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"
#include "tools_vfs/unique_fd.h"

namespace infer::tools {

enum class ResolverKind {
  kAuto,     // openat2 if the kernel answers it, else the walk
  kOpenat2,  // openat2 or an error
  kWalk,     // the portable walk, also where openat2 exists (tests run both)
};
const char* resolver_kind_name(ResolverKind kind);

// The directory that holds a path's final component, and that component (never "." or "..").
struct ParentAndName {
  UniqueFd dir;              // O_PATH | O_DIRECTORY, beneath ROOT
  std::string name;          // one name, for the *at syscalls
  std::string path;          // the resolved path relative to ROOT, for messages only
  bool must_be_dir = false;  // the path (or a final link's target) ends in "/" or "/."
};

class BeneathResolver {
 public:
  // Opens ROOT, which must be a directory. kAuto probes openat2 once.
  static Result<BeneathResolver> open_root(const std::string& root,
                                           ResolverKind kind = ResolverKind::kAuto);

  ResolverKind kind() const { return kind_; }  // kOpenat2 or kWalk, never kAuto
  int root_fd() const { return root_.get(); }

  // Opens PATH with open(2) FLAGS (O_CLOEXEC added; O_CREAT refused: creation goes through
  // parent()). A final symbolic link is followed beneath ROOT unless FLAGS holds O_NOFOLLOW.
  Result<UniqueFd> open(std::string_view path, int flags) const;

  // Opens the directory that holds PATH's final component. With follow_final a final symbolic
  // link is followed (beneath ROOT, up to kMaxSymlinkHops) to the directory and name of its
  // target, so a write through a link inside ROOT replaces the target and one pointing out is
  // refused; without, the link itself is the entry (mkdir, remove).
  Result<ParentAndName> parent(std::string_view path, bool follow_final) const;

 private:
  BeneathResolver(UniqueFd root, ResolverKind kind) : root_(std::move(root)), kind_(kind) {}
  Result<UniqueFd> open_openat2(std::string_view path, int flags) const;
  Result<UniqueFd> open_walk(std::string_view path, int flags) const;

  UniqueFd root_;
  ResolverKind kind_;
};

}  // namespace infer::tools
