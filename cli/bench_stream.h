// infer --bench --bench-stream / --bench-context: decode speed along a long stream. The first
// times N real decode steps and reports a point every K tokens (the per-token time curve and
// resident memory); the second compares, at given stream lengths, the exact cache with the KV
// ring (DESIGN.md §4), each brought to that length with synthetic K/V rows.
#pragma once

#include "base/result.h"
#include "cli/options.h"

namespace infer::cli {

inline constexpr int kBenchContextSteps = 8;  // timed decode steps per length and cache

Result<void> run_bench_stream(const Options& opts);

}  // namespace infer::cli
