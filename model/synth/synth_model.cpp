// Writes random-weight checkpoints: plans tensors from the tensor table, fills them in 64 MB
// chunks across the pool and streams each chunk to the safetensors writer while the next fills.
#include "model/synth/synth_model.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>
#include <vector>

#include "base/progress.h"
#include "model/mapped_file.h"
#include "model/synth/random_fill.h"
#include "model/tensor_table.h"
#include "model/thread_pool.h"

namespace infer {
namespace {

constexpr size_t kChunkBytes = size_t{64} << 20;
constexpr std::string_view kPrefix = "model.language_model.";

struct PlannedTensor {
  TensorHeaderEntry header;
  FillRule rule;
  uint64_t key = 0;
};

// tie_word_embeddings of text_config, else of the top level; true when absent (§2).
bool tied_embeddings(std::string_view config_text) {
  const auto j = nlohmann::json::parse(config_text, nullptr, false);
  if (!j.is_object()) return true;
  for (const auto* obj : {j.contains("text_config") ? &j["text_config"] : nullptr, &j}) {
    if (obj && obj->is_object() && obj->contains("tie_word_embeddings") &&
        (*obj)["tie_word_embeddings"].is_boolean()) {
      return (*obj)["tie_word_embeddings"].get<bool>();
    }
  }
  return true;
}

// The table's tensors, plus "lm_head.weight" [V, H] (outside the prefix, as save_pretrained
// writes it) when the embeddings are not tied.
std::vector<PlannedTensor> plan_tensors(const ModelConfig& cfg, bool tied, uint64_t seed,
                                        DType dtype) {
  std::vector<TensorSpec> specs = expected_tensors(cfg);
  if (!tied) {
    specs.push_back(TensorSpec{
        "lm_head.weight", {cfg.text.vocab_size, cfg.text.hidden_size}, TensorKind::kEmbedding, -1});
  }
  std::vector<PlannedTensor> out;
  for (const TensorSpec& spec : specs) {
    PlannedTensor t;
    const std::string prefix = spec.name == "lm_head.weight" ? "" : std::string(kPrefix);
    t.header = TensorHeaderEntry{prefix + spec.name, dtype, spec.shape};
    t.rule = fill_rule(spec, cfg.text);
    t.key = tensor_key(seed, spec.name);
    out.push_back(std::move(t));
  }
  return out;
}

// Consecutive runs of tensors, each at most shard_bytes unless one tensor alone is larger.
std::vector<std::vector<const PlannedTensor*>> plan_shards(const std::vector<PlannedTensor>& all,
                                                           size_t shard_bytes) {
  std::vector<std::vector<const PlannedTensor*>> shards(1);
  uint64_t used = 0;
  for (const PlannedTensor& t : all) {
    const uint64_t n = t.header.nbytes();
    if (shard_bytes > 0 && !shards.back().empty() && used + n > shard_bytes) {
      shards.emplace_back();
      used = 0;
    }
    shards.back().push_back(&t);
    used += n;
  }
  return shards;
}

std::string shard_name(size_t i, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

Result<void> write_text(const std::filesystem::path& file, std::string_view text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) return make_error(ErrorCode::kIo, "cannot write " + file.string());
  return Ok{};
}

// Removes what an earlier run may have left in DIR, so old shards never mix with new ones.
Result<void> clear_checkpoint_files(const std::filesystem::path& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool shard = name.starts_with("model-") && name.ends_with(".safetensors");
    if (shard || name == "model.safetensors" || name == "model.safetensors.index.json") {
      std::filesystem::remove(entry.path(), ec);
      if (ec) return make_error(ErrorCode::kIo, "cannot remove " + entry.path().string());
    }
  }
  if (ec) return make_error(ErrorCode::kIo, "cannot list " + dir.string() + ": " + ec.message());
  return Ok{};
}

// Streams one file: fills chunk k+1 on the pool while chunk k is being written.
class ShardWriter {
 public:
  ShardWriter(ThreadPool& pool, DType dtype, SynthProgress& progress, const SynthProgressFn& fn)
      : pool_(pool), dtype_(dtype), progress_(progress), fn_(fn) {
    for (auto& b : buffers_) b.resize(kChunkBytes);
  }

  Result<void> write(const std::filesystem::path& file,
                     const std::vector<const PlannedTensor*>& tensors) {
    std::vector<TensorHeaderEntry> headers;
    for (const PlannedTensor* t : tensors) headers.push_back(t->header);
    INFER_TRY(SafetensorsWriter writer, SafetensorsWriter::create(file, std::move(headers)));
    const size_t esize = dtype_size(dtype_);
    const int64_t chunk_elems = static_cast<int64_t>(kChunkBytes / esize);
    std::future<Result<void>> pending;
    size_t next_buffer = 0;
    for (const PlannedTensor* t : tensors) {
      const int64_t numel = static_cast<int64_t>(t->header.nbytes() / esize);
      for (int64_t begin = 0; begin < numel; begin += chunk_elems) {
        const int64_t n = std::min(chunk_elems, numel - begin);
        uint8_t* buf = buffers_[next_buffer].data();
        next_buffer ^= 1;
        pool_.parallel_for(
            n,
            [&](int64_t b, int64_t e) {
              fill_elements(t->key, t->rule, dtype_, begin + b, begin + e, buf + b * esize);
            },
            256);
        if (pending.valid()) INFER_TRY_VOID(pending.get());
        const std::span<const uint8_t> bytes(buf, static_cast<size_t>(n) * esize);
        pending =
            std::async(std::launch::async, [&writer, bytes] { return writer.write_next(bytes); });
        progress_.bytes_done += bytes.size();
        if (begin + n == numel) ++progress_.tensors_done;
        if (fn_) fn_(progress_);
      }
      if (numel == 0) ++progress_.tensors_done;
    }
    if (pending.valid()) INFER_TRY_VOID(pending.get());
    return writer.finish();
  }

 private:
  ThreadPool& pool_;
  DType dtype_;
  SynthProgress& progress_;
  const SynthProgressFn& fn_;
  std::vector<uint8_t> buffers_[2];
};

}  // namespace

std::string generation_config_json(const ModelConfig& cfg) {
  std::vector<int> eos = cfg.text.eos_token_id;
  constexpr int kEndOfTurn = 106;
  if (eos.size() <= 1 && kEndOfTurn < cfg.text.vocab_size &&
      std::find(eos.begin(), eos.end(), kEndOfTurn) == eos.end()) {
    eos.push_back(kEndOfTurn);
  }
  nlohmann::ordered_json j = {{"bos_token_id", cfg.text.bos_token_id},
                              {"do_sample", true},
                              {"eos_token_id", eos},
                              {"pad_token_id", cfg.text.pad_token_id},
                              {"temperature", 1.0},
                              {"top_k", 64},
                              {"top_p", 0.95}};
  return j.dump(2) + "\n";
}

uint64_t random_checkpoint_bytes(const ModelConfig& cfg, DType dtype) {
  uint64_t total = 0;
  for (const PlannedTensor& t : plan_tensors(cfg, true, 0, dtype)) total += t.header.nbytes();
  return total;
}

Result<void> write_random_checkpoint_text(std::string_view config_text,
                                          const std::filesystem::path& out_dir, uint64_t seed,
                                          DType dtype, ThreadPool& pool, size_t shard_bytes,
                                          const SynthProgressFn& progress) {
  INFER_TRY(ModelConfig cfg, parse_config(config_text));
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec)
    return make_error(ErrorCode::kIo, "cannot create " + out_dir.string() + ": " + ec.message());
  INFER_TRY_VOID(clear_checkpoint_files(out_dir));
  INFER_TRY_VOID(write_text(out_dir / "config.json", config_text));
  INFER_TRY_VOID(write_text(out_dir / "generation_config.json", generation_config_json(cfg)));

  const std::vector<PlannedTensor> tensors =
      plan_tensors(cfg, tied_embeddings(config_text), seed, dtype);
  const auto shards = plan_shards(tensors, shard_bytes);
  SynthProgress state;
  state.tensors_total = tensors.size();
  for (const PlannedTensor& t : tensors) state.bytes_total += t.header.nbytes();
  ShardWriter writer(pool, dtype, state, progress);
  if (shard_bytes == 0) return writer.write(out_dir / "model.safetensors", shards[0]);

  std::vector<std::pair<std::string, std::string>> weight_map;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string file = shard_name(i, shards.size());
    INFER_TRY_VOID(writer.write(out_dir / file, shards[i]));
    for (const PlannedTensor* t : shards[i]) weight_map.emplace_back(t->header.name, file);
  }
  return write_safetensors_index(out_dir, weight_map, state.bytes_total);
}

Result<TensorStore> random_tensor_store(std::string_view config_text, uint64_t seed, DType dtype,
                                        ThreadPool& pool) {
  INFER_TRY(ModelConfig cfg, parse_config(config_text));
  const std::vector<PlannedTensor> tensors =
      plan_tensors(cfg, tied_embeddings(config_text), seed, dtype);
  constexpr uint64_t kAlign = 64;
  std::vector<uint64_t> offsets;
  uint64_t total = 0;
  for (const PlannedTensor& t : tensors) {
    offsets.push_back(total);
    total += (t.header.nbytes() + kAlign - 1) / kAlign * kAlign;
  }
  INFER_TRY(std::unique_ptr<MappedFile> block,
            MappedFile::anonymous(size_t(total), "random weights (seed " + std::to_string(seed) + ")"));
  const size_t esize = dtype_size(dtype);
  std::vector<std::pair<std::string, TensorView>> views;
  ProgressStage stage("generating random weights", int64_t(tensors.size()), "tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    stage.advance(int64_t(i));
    const PlannedTensor& t = tensors[i];
    const int64_t numel = int64_t(t.header.nbytes() / esize);
    uint8_t* out = block->writable() + offsets[i];
    pool.parallel_for(
        numel,
        [&](int64_t b, int64_t e) { fill_elements(t.key, t.rule, dtype, b, e, out + b * esize); },
        1 << 16);
    views.emplace_back(canonical_tensor_name(t.header.name),
                       TensorView{dtype, t.header.shape, out, size_t(t.header.nbytes())});
  }
  return TensorStore::from_memory(std::move(block), std::move(views));
}

Result<void> write_random_checkpoint(const std::filesystem::path& config_json,
                                     const std::filesystem::path& out_dir, uint64_t seed,
                                     DType dtype, ThreadPool& pool, size_t shard_bytes,
                                     const SynthProgressFn& progress) {
  std::ifstream in(config_json, std::ios::binary);
  if (!in) return make_error(ErrorCode::kNotFound, "cannot read " + config_json.string());
  std::ostringstream text;
  text << in.rdbuf();
  return write_random_checkpoint_text(text.str(), out_dir, seed, dtype, pool, shard_bytes,
                                      progress);
}

}  // namespace infer
