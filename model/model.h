// A loaded Gemma 4 text model: config, memory-mapped tensors and the weights bound to them
// (quantized at load when asked), ready for a backend to run.
#pragma once

#include <filesystem>
#include <cstdint>
#include <memory>
#include <string_view>

#include "base/result.h"
#include "model/config.h"
#include "model/matrix.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace infer {

class ThreadPool;

// Quant (the weight format asked for at load) is declared in model/weights.h.
struct LoadOptions {
  Quant quant = Quant::kAsStored;
  EmbedScale embed_scale = EmbedScale::kTableDtype;  // kF32 to match an fp32 oracle (§4.2)
};

class Model {
 public:
  // Reads DIR/config.json and the safetensors in DIR; `pool` quantizes on all its threads.
  static Result<std::unique_ptr<Model>> load(const std::filesystem::path& dir,
                                             const LoadOptions& opts, ThreadPool& pool);
  // A random-weight model of CONFIG_TEXT's shapes generated in memory (synth_model.h's
  // random_tensor_store, the same values mkmodel writes with this seed and dtype).
  static Result<std::unique_ptr<Model>> random(std::string_view config_text, uint64_t seed,
                                               DType dtype, const LoadOptions& opts,
                                               ThreadPool& pool);
  const ModelConfig& config() const;
  const ModelWeights& weights() const;
  // Bytes of weights a decode step reads (every projection, the head, one PLE row, norms).
  size_t decode_bytes_per_token() const;

  ~Model();

 private:
  Model();
  static Result<std::unique_ptr<Model>> from_store(ModelConfig config, TensorStore store,
                                                   const LoadOptions& opts, ThreadPool& pool);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace infer
