// Which model directory a run uses: --model, else ../gemma-4-E2B beside the working directory,
// else the built-in demo model (random weights), announced on stderr.
#pragma once

#include <filesystem>

#include "base/result.h"
#include "cli/options.h"

namespace infer::cli {

struct ModelChoice {
  std::filesystem::path dir;
  bool demo = false;  // the built-in random-weight model
};

// An explicit --model must be an existing directory (a kNotFound error otherwise).
Result<ModelChoice> choose_model(const Options& opts);

}  // namespace infer::cli
