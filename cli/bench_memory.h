// infer --bench --bench-memory N --memory PATH: what episodic memory costs (issue 29).
// 1. Decode through the actor pipeline with memory off and on, side by side (alternating runs
//    of N tokens each, the window small enough that tokens leave it and become episodes): the
//    stream's ms per token, median and p99, and the ratio.
// 2. Recall latency per turn (read the query rows, score, decode, place into the recall tier)
//    with 64, 1,000 and 10,000 stored episodes, the open time and the file size per episode.
// 3. Stored bytes per token against bf16 rows.
// PATH must not exist: it and PATH.N are the bench's scratch stores, removed at the end.
#pragma once

#include "base/result.h"
#include "cli/options.h"

namespace infer::cli {

Result<void> run_bench_memory(const Options& opts);

}  // namespace infer::cli
