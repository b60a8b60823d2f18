// Which model directory a run uses: --model, else ../gemma-4-E2B beside the working directory,
// else the built-in demo model (random weights), announced on stderr.
#pragma once

#include <filesystem>
#include <memory>

#include "base/result.h"
#include "cli/options.h"
#include "cli/threads.h"
#include "model/model.h"

namespace infer::cli {

struct ModelChoice {
  std::filesystem::path dir;  // the checkpoint; for a random model, the config's directory
  bool demo = false;          // the built-in random-weight model
  // --model CONFIG.json: random bf16 weights of that config's shapes (seed 1, as mkmodel's
  // default), generated in memory; benchmarks of shapes whose checkpoint would not fit on disk.
  std::filesystem::path random_config;
};

// An explicit --model must be an existing directory or a config .json file (a kNotFound error
// otherwise).
Result<ModelChoice> choose_model(const Options& opts);

// Loads the chosen checkpoint, or generates the random model; says which on stderr for the latter.
Result<std::unique_ptr<Model>> load_model(const ModelChoice& choice, const LoadOptions& opts,
                                          ThreadPool& pool);

// load_model() on a pool of load_threads(opts), which is then resized for decoding: --threads,
// else default_threads() of the loaded model's bytes per token.
struct LoadedModel {
  std::unique_ptr<Model> model;
  std::unique_ptr<ThreadPool> pool;  // sized for decoding
  ThreadChoice threads;              // which count, and why
};
Result<LoadedModel> load_model_sized(const ModelChoice& choice, const Options& opts);

}  // namespace infer::cli
