// Where every bench mode's JSON goes: --bench FILE (or --bench-actors FILE, ...), else stdout.
#pragma once

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "cli/options.h"

namespace infer::cli {

// Writes j (indented, one trailing newline) to opts.bench_file, or to stdout when none is given.
Result<void> write_bench_json(const Options& opts, const nlohmann::ordered_json& j);

}  // namespace infer::cli
