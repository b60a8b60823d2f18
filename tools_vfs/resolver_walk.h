// The portable resolver (resolver.h): walks a path one component at a time from ROOT with
// O_NOFOLLOW, expanding symbolic links itself, for kernels without openat2.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"
#include "tools_vfs/unique_fd.h"

namespace infer::tools {

// Opens PATH beneath ROOT_FD with FLAGS; the same refusals as openat2 with RESOLVE_BENEATH |
// RESOLVE_NO_MAGICLINKS: ".." above ROOT, absolute link targets, links read from procfs.
Result<UniqueFd> walk_beneath(int root_fd, std::string_view path, int flags);

// The target of the symbolic link NAME in DIR, refused when it is absolute or a procfs magic
// link (ELOOP, as RESOLVE_NO_MAGICLINKS). PATH is for messages.
Result<std::string> read_link_beneath(int dir, const std::string& name, std::string_view path);

}  // namespace infer::tools
