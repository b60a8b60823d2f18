// The checks every VFS path passes before a syscall sees it, the same for both resolvers
// (docs/TOOLS.md): no NUL byte, relative to ROOT, at most kMaxPathBytes, each name at most
// kMaxNameBytes. Also the errno → Error mapping the resolvers and operations share.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace infer::tools {

inline constexpr size_t kMaxPathBytes = 4095;  // PATH_MAX less its NUL
inline constexpr size_t kMaxNameBytes = 255;   // NAME_MAX
inline constexpr int kMaxSymlinkHops = 40;     // the kernel's MAXSYMLINKS

// PATH's components in order, "" and "." dropped, ".." kept (the resolver decides what it may
// climb). Refuses a NUL byte, an absolute path, an over-long path or name. `trailing_slash` is
// set when PATH ends in "/" or "/." (the final component must then be a directory).
struct SplitPath {
  std::vector<std::string> components;
  bool trailing_slash = false;
};
Result<SplitPath> split_path(std::string_view path);

// Components joined with '/', "" for none.
std::string join_path(const std::vector<std::string>& components, size_t count);

// PATH made safe for a message: non-printable bytes as \xNN, cut to 160 bytes with a count.
std::string printable_path(std::string_view path);

// What a failed syscall on PATH means: EXDEV (escapes ROOT), ELOOP and ENAMETOOLONG are
// kInvalidArgument, ENOENT kNotFound, the rest kIo; the message names the operation and path.
Error errno_error(int err, std::string_view op, std::string_view path);

// The error for a path that leaves ROOT (EXDEV's, used by the walking resolver too).
Error escape_error(std::string_view path, std::string_view why);

}  // namespace infer::tools
