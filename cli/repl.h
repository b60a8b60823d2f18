// The interactive session (no prompt given): a REPL on a terminal, or one turn per line of piped
// input for scripts. Both drive the actor pipeline through a FrontEnd that prints as tokens come.
#pragma once

#include "base/result.h"
#include "cli/options.h"

namespace infer::cli {

enum class StdinKind { kTerminal, kPipe, kOther };
// A tty, a pipe or regular file (the pipe mode), or anything else (/dev/null, closed): one-shot.
StdinKind stdin_kind();

// Runs the session until /quit, a Ctrl-C at the prompt, or the end of input.
Result<void> run_repl(const Options& opts, bool interactive);

}  // namespace infer::cli
