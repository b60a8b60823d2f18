// infer --bench: load, prefill and decode speed, memory bandwidth and tokenizer speed of one
// model on this machine, as JSON (stdout or a file) with a readable summary on stderr.
#pragma once

#include "base/result.h"
#include "cli/options.h"

namespace infer::cli {

inline constexpr int kBenchPrefillTokens = 512;
inline constexpr int kBenchDecodeTokens = 128;

Result<void> run_bench(const Options& opts);

}  // namespace infer::cli
