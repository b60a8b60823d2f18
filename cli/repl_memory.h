// The REPL's episodic memory commands (/memory, /remember, /forget N): each a MemoryOp through
// the pipeline (after the turns before it), its answer printed on stdout.
#pragma once

#include <cstdint>

#include "actors/pipeline.h"
#include "cli/console_front_end.h"
#include "cli/repl_input.h"

namespace infer::cli {

// Runs in.command (kMemory, kRemember or kForget). memory_on: the session runs --memory; when
// it does not, prints how to turn it on. Returns false when the operation failed (reported on
// stderr).
bool run_memory_command(const ReplInput& in, bool memory_on, actors::Pipeline& pipeline,
                        ConsoleFrontEnd& front);

}  // namespace infer::cli
