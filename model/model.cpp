// Model::load: config.json, the memory-mapped checkpoint and the weights bound to it.
#include "model/model.h"

#include "model/safetensors.h"
#include "model/synth/synth_model.h"

namespace infer {

struct Model::Impl {
  ModelConfig config;
  TensorStore store;  // owns the mmaps the weights point into; declared before weights
  ModelWeights weights;
  size_t decode_bytes = 0;
};

Model::Model() = default;
Model::~Model() = default;

Result<std::unique_ptr<Model>> Model::load(const std::filesystem::path& dir,
                                           const LoadOptions& opts, ThreadPool& pool) {
  INFER_TRY(ModelConfig config, load_config(dir));
  INFER_TRY(TensorStore store, TensorStore::open(dir));
  return from_store(std::move(config), std::move(store), opts, pool);
}

Result<std::unique_ptr<Model>> Model::random(std::string_view config_text, uint64_t seed,
                                             DType dtype, const LoadOptions& opts,
                                             ThreadPool& pool) {
  INFER_TRY(ModelConfig config, parse_config(config_text));
  INFER_TRY(TensorStore store, random_tensor_store(config_text, seed, dtype, pool));
  return from_store(std::move(config), std::move(store), opts, pool);
}

Result<std::unique_ptr<Model>> Model::from_store(ModelConfig config, TensorStore store,
                                                 const LoadOptions& opts, ThreadPool& pool) {
  INFER_TRY(ModelWeights weights,
            bind_weights(config, store, BindOptions{opts.quant, opts.embed_scale}, pool));
  std::unique_ptr<Model> m(new Model());
  m->impl_ =
      std::unique_ptr<Impl>(new Impl{std::move(config), std::move(store), std::move(weights), 0});
  m->impl_->decode_bytes = weights_decode_bytes(m->impl_->config, m->impl_->weights);
  return m;
}

const ModelConfig& Model::config() const { return impl_->config; }
const ModelWeights& Model::weights() const { return impl_->weights; }
size_t Model::decode_bytes_per_token() const { return impl_->decode_bytes; }

}  // namespace infer
