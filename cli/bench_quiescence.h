// infer --bench --bench-quiescence N [--gpu]: layer skipping (DESIGN.md §6) against exact
// decoding, on the CPU or the Vulkan path. The exact model decodes N greedy tokens after a prompt;
// then, for each threshold, a quiescent forward is teacher-forced on the same tokens: fraction of
// layers skipped, decode speedup, greedy agreement and mean KL(exact || quiescent) of the
// next-token distributions.
#pragma once

#include "base/result.h"
#include "cli/options.h"

namespace infer::cli {

Result<void> run_bench_quiescence(const Options& opts);

}  // namespace infer::cli
