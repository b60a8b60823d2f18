// Model directory resolution and the demo-model notice.
#include "cli/model_choice.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <system_error>

#include "model/synth/demo_model.h"

namespace infer::cli {
namespace {

constexpr uint64_t kRandomModelSeed = 1;  // mkmodel's --seed in the README's bench recipe

}  // namespace

Result<ModelChoice> choose_model(const Options& opts) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!opts.model_dir.empty()) {
    if (opts.model_dir.extension() == ".json" && fs::is_regular_file(opts.model_dir, ec)) {
      ModelChoice c{opts.model_dir.parent_path(), false, opts.model_dir};
      if (c.dir.empty()) c.dir = ".";
      return c;
    }
    if (!fs::is_directory(opts.model_dir, ec)) {
      return make_error(ErrorCode::kNotFound,
                        "model directory (or config .json) '" + opts.model_dir.string() +
                            "' does not exist");
    }
    return ModelChoice{opts.model_dir, false};
  }
  const fs::path e2b = fs::path("..") / "gemma-4-E2B";
  if (fs::is_directory(e2b, ec)) return ModelChoice{e2b, false};

  INFER_TRY(fs::path demo, ensure_demo_model());
  std::fprintf(stderr,
               "infer: no --model given and %s does not exist: using the built-in demo model "
               "(random weights, so its output is random text) in %s\n",
               e2b.string().c_str(), demo.string().c_str());
  return ModelChoice{demo, true};
}

Result<std::unique_ptr<Model>> load_model(const ModelChoice& choice, const LoadOptions& opts,
                                          ThreadPool& pool) {
  if (choice.random_config.empty()) return Model::load(choice.dir, opts, pool);
  std::ifstream in(choice.random_config, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) return make_error(ErrorCode::kIo, "cannot read " + choice.random_config.string());
  std::fprintf(stderr, "infer: random bf16 weights (seed %llu) of %s's shapes, generated in memory\n",
               (unsigned long long)kRandomModelSeed, choice.random_config.string().c_str());
  return Model::random(text.str(), kRandomModelSeed, DType::kBF16, opts, pool);
}

Result<LoadedModel> load_model_sized(const ModelChoice& choice, const Options& opts) {
  LoadedModel m;
  m.pool = std::make_unique<ThreadPool>(load_threads(opts));
  INFER_TRY(m.model, load_model(choice, LoadOptions{opts.quant}, *m.pool));
  m.threads = decode_threads(opts, m.model->decode_bytes_per_token());
  resize_pool(m.pool, m.threads.threads);
  return m;
}

}  // namespace infer::cli
