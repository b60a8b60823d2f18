// infer --bench --bench-stream / --bench-context: decode speed along a long stream. The first
// times N real decode steps and reports a point every K tokens (the per-token time curve and
// resident memory); the second compares, at given stream lengths, the exact cache with the KV
// ring (DESIGN.md §4), each brought to that length with synthetic K/V rows.
#pragma once

#include "base/result.h"
#include "cli/options.h"

namespace infer::cli {

// Decode steps per length and cache: untimed, then timed (the median counts). The GPU takes more
// of both: a few ms a step, and clocks that ramp up only under sustained work (8 steps after the
// cache fill read 18 ms a token on the H200, 4 ms once warm).
struct ContextSteps {
  int warmup = 1;
  int timed = 8;
};
inline constexpr ContextSteps kBenchContextStepsCpu{1, 8};
inline constexpr ContextSteps kBenchContextStepsGpu{32, 64};

Result<void> run_bench_stream(const Options& opts);

}  // namespace infer::cli
