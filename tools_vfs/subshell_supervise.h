// The subshell's wait: reads the child's pipes into head/tail captures, watches its pidfd and
// the deadlines, ends its process group (SIGTERM, then SIGKILL after a grace), and returns only
// once the child is reaped and its group is gone (or a bounded wait for that has passed).
#pragma once

#include "tools_vfs/subshell.h"
#include "tools_vfs/subshell_spawn.h"

namespace infer::tools {

// OUT and ERR: the read ends, non-blocking; ERR is invalid when stderr is merged into OUT.
SubshellResult supervise(SpawnedChild child, UniqueFd out, UniqueFd err,
                         const SubshellOptions& options);

}  // namespace infer::tools
