// Model directory resolution and the demo-model notice.
#include "cli/model_choice.h"

#include <cstdio>
#include <system_error>

#include "model/synth/demo_model.h"

namespace infer::cli {

Result<ModelChoice> choose_model(const Options& opts) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!opts.model_dir.empty()) {
    if (!fs::is_directory(opts.model_dir, ec)) {
      return make_error(ErrorCode::kNotFound,
                        "model directory '" + opts.model_dir.string() + "' does not exist");
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

}  // namespace infer::cli
