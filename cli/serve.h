// infer --serve: the binary full-duplex protocol of docs/PROTOCOL.md on stdin/stdout, over the
// actor pipeline. stdout carries frames only; logs go to stderr.
#pragma once

#include "base/result.h"
#include "cli/options.h"

namespace infer::cli {

// Serves one session until SHUTDOWN or EOF on stdin. Returns the process exit status: 0 on a
// clean end, 1 after a version mismatch. Loading the model can fail (an Error).
Result<int> run_serve(const Options& opts);

}  // namespace infer::cli
