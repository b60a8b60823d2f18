// Random-weight Gemma 4 checkpoints with the real tensor names and shapes (mkmodel, the demo
// model): config.json, generation_config.json and model.safetensors or shards plus an index.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "model/config.h"
#include "model/safetensors.h"

namespace infer {

class ThreadPool;

// Reported after each chunk is written.
struct SynthProgress {
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
  size_t tensors_done = 0;
  size_t tensors_total = 0;
};
using SynthProgressFn = std::function<void(const SynthProgress&)>;

// Reads CONFIG_JSON and writes a checkpoint of every tensor in expected_tensors() into OUT_DIR
// (created if missing; an older model.safetensors, shards or index there are removed first):
//   config.json             CONFIG_JSON's bytes, unchanged;
//   generation_config.json  see generation_config_json();
//   model.safetensors       tensors named as save_pretrained writes them
//                           ("model.language_model." + the canonical name), in table order,
//                           then "lm_head.weight" when tie_word_embeddings is false;
//   or, when shard_bytes > 0, model-0000i-of-0000n.safetensors of at most shard_bytes each (a
//   larger tensor gets a shard of its own) and model.safetensors.index.json.
// Element values depend only on (seed, tensor name, element index) (random_fill.h), so the bytes
// are the same for any pool size. Memory: one 64 MB chunk at a time.
Result<void> write_random_checkpoint(const std::filesystem::path& config_json,
                                     const std::filesystem::path& out_dir, uint64_t seed,
                                     DType dtype, ThreadPool& pool, size_t shard_bytes = 0,
                                     const SynthProgressFn& progress = {});

// The same from config.json text (the demo model's config is built in).
Result<void> write_random_checkpoint_text(std::string_view config_text,
                                          const std::filesystem::path& out_dir, uint64_t seed,
                                          DType dtype, ThreadPool& pool, size_t shard_bytes = 0,
                                          const SynthProgressFn& progress = {});

// The tensors write_random_checkpoint_text would write (same names, shapes, dtype and element
// values), generated straight into memory on all of `pool`'s threads: benchmarks of shapes whose
// checkpoint would not fit on disk. Each tensor starts 64-byte aligned.
Result<TensorStore> random_tensor_store(std::string_view config_text, uint64_t seed, DType dtype,
                                        ThreadPool& pool);

// generation_config.json for a synthetic checkpoint: Gemma's sampling defaults (temperature 1,
// top_k 64, top_p 0.95) and end-of-generation ids: the config's eos_token_id list when it has
// several, else that id plus 106 (Gemma's "<turn|>") when 106 is inside the vocabulary.
std::string generation_config_json(const ModelConfig& cfg);

// Total bytes of the tensors a tied checkpoint of this config has in `dtype`.
uint64_t random_checkpoint_bytes(const ModelConfig& cfg, DType dtype);

}  // namespace infer
