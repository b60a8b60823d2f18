// infer --bench-actors: the per-token cost of the actor pipeline (DESIGN.md §3) on one model.
#pragma once

#include "base/result.h"
#include "cli/options.h"

namespace infer::cli {

// Greedy decode of -n tokens (default 256) through the bare loop and through the pipeline,
// twice each; JSON with both token rates, the added time per token and the stream -> io hop
// latency (median, p90, max) to stdout or the --bench-actors FILE.
Result<void> run_bench_actors(const Options& opts);

}  // namespace infer::cli
