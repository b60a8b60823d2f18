// --bench --tools ROOT: the decode cost of the tool-call loop while no call happens, side by side
// in one run (DESIGN.md §10): the plain engine loop, the loop with tools off (calls parsed and
// reported: what a session without --tools runs) and with tools on and idle.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/result.h"
#include "cli/backend.h"
#include "cli/options.h"
#include "model/tokenizer/tokenizer.h"

namespace infer::cli {

// Rounds of the three variants, each 48 greedy steps after the first 32 of `ids`;
// the JSON has per-run means, step medians and 10th percentiles, and the ratios to plain.
Result<nlohmann::ordered_json> bench_tools(Backend& backend, const std::vector<int32_t>& ids,
                                           const Tokenizer& tok, const Options& opts);

}  // namespace infer::cli
