// Generates the demo model once into the cache, atomically (temporary directory + rename).
#include "model/synth/demo_model.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>
#include <thread>

#include "base/half.h"
#include "model/safetensors.h"
#include "model/synth/demo_tokenizer.h"
#include "model/synth/synth_model.h"
#include "model/thread_pool.h"

namespace infer {
namespace {

constexpr const char* kDemoName = "demo-v2";  // also in the /tmp fallback below
const char* const kFiles[] = {"config.json", "generation_config.json", "tokenizer.json",
                              "model.safetensors"};

bool is_complete(const std::filesystem::path& dir) {
  std::error_code ec;
  for (const char* f : kFiles) {
    if (!std::filesystem::is_regular_file(dir / f, ec)) return false;
  }
  return true;
}

// A temporary sibling of DIR left by a run that was killed more than an hour ago.
void remove_stale_temporaries(const std::filesystem::path& dir) {
  std::error_code ec;
  const std::string prefix = dir.filename().string() + ".tmp-";
  const auto cutoff = std::filesystem::file_time_type::clock::now() - std::chrono::hours(1);
  for (const auto& entry : std::filesystem::directory_iterator(dir.parent_path(), ec)) {
    if (!entry.path().filename().string().starts_with(prefix)) continue;
    std::error_code ec2;
    if (entry.last_write_time(ec2) < cutoff && !ec2) std::filesystem::remove_all(entry.path(), ec2);
  }
}

std::string temporary_name(const std::filesystem::path& dir) {
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  const size_t tid = std::hash<std::thread::id>()(std::this_thread::get_id());
  return dir.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
         std::to_string(static_cast<uint64_t>(now) ^ tid);
}

// Scales the lm_head rows of ids that are not text (specials, byte tokens, "<unusedN>") by 1/16:
// their logits sit near 0 while those of words spread with std ~2, so random sampling mostly
// picks words instead of stray bytes that print as U+FFFD.
Result<void> damp_non_text_rows(const std::filesystem::path& file, int first_unused_id) {
  const std::string where = file.string();
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  uint64_t header_len = 0;
  f.read(reinterpret_cast<char*>(&header_len), 8);
  if (!f || header_len > (uint64_t{1} << 26))
    return make_error(ErrorCode::kIo, "cannot read " + where);
  std::vector<uint8_t> head(8 + header_len);
  std::memcpy(head.data(), &header_len, 8);
  f.read(reinterpret_cast<char*>(head.data() + 8), static_cast<std::streamsize>(header_len));
  if (!f) return make_error(ErrorCode::kIo, "cannot read the header of " + where);
  INFER_TRY(SafetensorsHeader header,
            parse_safetensors_header(head, std::filesystem::file_size(file), where));
  const TensorEntry* embed = nullptr;
  for (const TensorEntry& t : header.tensors) {
    if (t.name == "lm_head.weight") embed = &t;
  }
  if (embed == nullptr || embed->dtype != DType::kBF16 || embed->shape.size() != 2) {
    return make_error(ErrorCode::kNotFound, where + ": no bf16 [V, H] lm_head.weight");
  }
  const int64_t V = embed->shape[0];
  const size_t H = static_cast<size_t>(embed->shape[1]);
  std::vector<bf16> row(H);
  const auto row_bytes = static_cast<std::streamsize>(H * sizeof(bf16));
  for (int64_t id = 0; id < V; ++id) {
    if (id >= kDemoFirstByteId + 256 && id < first_unused_id) continue;
    const auto offset = static_cast<std::streamoff>(header.data_start + embed->begin) +
                        static_cast<std::streamoff>(id) * row_bytes;
    f.seekg(offset);
    f.read(reinterpret_cast<char*>(row.data()), row_bytes);
    for (bf16& x : row) x = f32_to_bf16(bf16_to_f32(x) * (1.0f / 16.0f));
    f.seekp(offset);
    f.write(reinterpret_cast<const char*>(row.data()), row_bytes);
  }
  f.close();
  if (!f) return make_error(ErrorCode::kIo, "cannot rewrite lm_head rows in " + where);
  return Ok{};
}

}  // namespace

std::filesystem::path demo_model_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return std::filesystem::path(xdg) / "infer" / kDemoName;
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] != '\0') {
    return std::filesystem::path(home) / ".cache" / "infer" / kDemoName;
  }
  return std::filesystem::path("/tmp") / (std::string("infer-") + kDemoName);
}

std::string demo_config_json() {
  using nlohmann::ordered_json;
  const char* s = "sliding_attention";
  const char* f = "full_attention";
  ordered_json text = {
      {"model_type", "gemma4_text"},
      {"vocab_size", kDemoVocabSize},
      {"hidden_size", 256},
      {"intermediate_size", 1024},
      {"num_hidden_layers", 6},
      {"layer_types", {s, s, f, s, s, f}},
      {"num_attention_heads", 4},
      {"num_key_value_heads", 1},
      {"head_dim", 64},
      {"global_head_dim", 128},
      {"attention_k_eq_v", false},
      {"num_global_key_value_heads", nullptr},
      {"hidden_size_per_layer_input", 64},
      {"vocab_size_per_layer_input", kDemoVocabSize},
      {"num_kv_shared_layers", 2},
      {"use_double_wide_mlp", true},
      {"enable_moe_block", false},
      {"hidden_activation", "gelu_pytorch_tanh"},
      {"rms_norm_eps", 1e-6},
      {"sliding_window", 128},
      {"final_logit_softcapping", 30.0},
      {"max_position_embeddings", 8192},
      {"rope_parameters",
       {{"full_attention",
         {{"partial_rotary_factor", 0.25},
          {"rope_theta", 1000000.0},
          {"rope_type", "proportional"}}},
        {"sliding_attention", {{"rope_theta", 10000.0}, {"rope_type", "default"}}}}},
      {"attention_bias", false},
      {"tie_word_embeddings", false},
      {"pad_token_id", kDemoPadId},
      {"bos_token_id", kDemoBosId},
      {"eos_token_id", {kDemoEosId, kDemoTurnEndId}},
  };
  ordered_json wrapper = {{"architectures", {"Gemma4ForConditionalGeneration"}},
                          {"model_type", "gemma4"},
                          {"dtype", "bfloat16"},
                          {"text_config", text},
                          {"vision_config", nullptr},
                          {"audio_config", nullptr},
                          {"tie_word_embeddings", false}};
  return wrapper.dump(2) + "\n";
}

Result<void> write_demo_model(const std::filesystem::path& dir, ThreadPool& pool) {
  INFER_TRY_VOID(
      write_random_checkpoint_text(demo_config_json(), dir, kDemoSeed, DType::kBF16, pool));
  const DemoTokenizer tok = build_demo_tokenizer(kDemoVocabSize);
  INFER_TRY_VOID(damp_non_text_rows(dir / "model.safetensors", tok.first_unused_id));
  std::ofstream out(dir / "tokenizer.json", std::ios::binary | std::ios::trunc);
  out.write(tok.json.data(), static_cast<std::streamsize>(tok.json.size()));
  out.close();
  if (!out) return make_error(ErrorCode::kIo, "cannot write " + (dir / "tokenizer.json").string());
  return Ok{};
}

Result<std::filesystem::path> ensure_demo_model_at(const std::filesystem::path& dir,
                                                   ThreadPool& pool) {
  if (is_complete(dir)) return dir;
  std::error_code ec;
  std::filesystem::create_directories(dir.parent_path(), ec);
  if (ec) {
    return make_error(ErrorCode::kIo,
                      "cannot create " + dir.parent_path().string() + ": " + ec.message());
  }
  remove_stale_temporaries(dir);
  const std::filesystem::path tmp = dir.parent_path() / temporary_name(dir);
  Result<void> written = write_demo_model(tmp, pool);
  if (!written.ok()) {
    std::filesystem::remove_all(tmp, ec);
    return written.error();
  }
  // A directory left without all its files (never by us) is replaced; a complete one written
  // meanwhile by a concurrent run wins, and our copy is dropped.
  if (!is_complete(dir)) std::filesystem::remove_all(dir, ec);
  std::filesystem::rename(tmp, dir, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove_all(tmp, ignored);
    if (!is_complete(dir)) {
      return make_error(ErrorCode::kIo,
                        "cannot move the demo model into " + dir.string() + ": " + ec.message());
    }
  }
  return dir;
}

Result<std::filesystem::path> ensure_demo_model() {
  const int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  ThreadPool pool(threads);
  const std::filesystem::path dir = demo_model_dir();
  Result<std::filesystem::path> made = ensure_demo_model_at(dir, pool);
  const std::filesystem::path fallback = std::filesystem::path("/tmp") / "infer-demo-v2";
  if (made.ok() || dir == fallback) return made;
  return ensure_demo_model_at(fallback, pool);  // e.g. a read-only home directory
}

}  // namespace infer
