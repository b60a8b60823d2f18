// Gemma 4 text configuration (config.json, both published forms) and the per-layer plan
// derived from it once at load (GEMMA4_TEXT.md §3). Field names follow config.json.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace infer {

enum class LayerType { kSliding, kFull };

// rope_parameters[layer_type] (§3.3): only "default" and "proportional" are accepted.
struct RopeParams {
  std::string rope_type = "default";
  double rope_theta = 10000.0;
  double partial_rotary_factor = 1.0;  // used by "proportional" only
  double factor = 1.0;                 // inv_freq divisor, proportional only
};

// One decoder layer, as planned at load (§3.2).
struct LayerPlan {
  LayerType type = LayerType::kSliding;
  int head_dim = 0;
  int num_key_value_heads = 0;
  bool kv_shared = false;  // computes no K/V, reads kv_source's
  int kv_source = 0;       // the donor layer when kv_shared, else the layer itself
  bool is_donor = false;   // a later shared layer reads this layer's K/V
  bool k_eq_v = false;     // full layer of an attention_k_eq_v model: V from k_proj, no v_proj
  int mlp_intermediate = 0;
};

// The text config with defaults of Gemma4TextConfig 5.17.0 (§3.1).
struct TextConfig {
  int64_t vocab_size = 262144;
  int hidden_size = 2304;
  int intermediate_size = 9216;
  int num_hidden_layers = 30;
  int num_attention_heads = 8;
  int num_key_value_heads = 4;
  int head_dim = 256;
  std::string hidden_activation = "gelu_pytorch_tanh";
  double rms_norm_eps = 1e-6;
  int sliding_window = 512;
  std::optional<double> final_logit_softcapping;  // null: no soft-cap
  int hidden_size_per_layer_input = 256;          // P; 0 disables PLE
  int64_t vocab_size_per_layer_input = 262144;
  bool attention_k_eq_v = false;
  int num_kv_shared_layers = 0;
  bool use_double_wide_mlp = false;
  bool enable_moe_block = false;
  int num_experts = 0;
  int top_k_experts = 0;
  int moe_intermediate_size = 0;
  bool attention_bias = false;
  int64_t max_position_embeddings = 131072;
  int pad_token_id = 0;
  std::vector<int> eos_token_id = {1};
  int bos_token_id = 2;
  RopeParams rope_sliding;  // rope_parameters["sliding_attention"]
  RopeParams rope_full;     // rope_parameters["full_attention"]
};

struct ModelConfig {
  TextConfig text;
  std::vector<LayerPlan> layers;  // size num_hidden_layers
  bool is_wrapper = false;        // text_config nested (Gemma4ForConditionalGeneration)
  int first_kv_shared = 0;        // L - num_kv_shared_layers

  const RopeParams& rope(LayerType t) const {
    return t == LayerType::kFull ? text.rope_full : text.rope_sliding;
  }
};

// Sampling defaults from generation_config.json; absent keys stay unset.
struct GenerationConfig {
  std::optional<float> temperature;
  std::optional<int> top_k;
  std::optional<float> top_p;
  std::optional<bool> do_sample;
  std::vector<int> eos_token_id;  // empty: take the model config's
};

// Parses config.json text; `where` names the file in error messages.
Result<ModelConfig> parse_config(std::string_view json_text, std::string_view where = "config.json");
// Reads DIR/config.json.
Result<ModelConfig> load_config(const std::filesystem::path& dir);
// Parses generation_config.json text.
Result<GenerationConfig> parse_generation_config(std::string_view json_text,
                                                 std::string_view where = "generation_config.json");
// Reads DIR/generation_config.json; a missing file gives an empty GenerationConfig.
Result<GenerationConfig> load_generation_config(const std::filesystem::path& dir);

// RoPE inverse frequencies [head_dim/2] for one layer type (§4.6), computed in fp32 as HF does
// (bit-identical to golden.json's rope_inv_freq).
std::vector<float> rope_inv_freq(const RopeParams& rope, int head_dim);

}  // namespace infer
