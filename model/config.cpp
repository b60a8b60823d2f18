// config.json and generation_config.json: the one place per-model facts are read (GEMMA4_TEXT.md
// §3), with Gemma4TextConfig 5.17.0 defaults, both published forms and the per-layer plan (§3.2).
#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

#include "model/json_reader.h"

namespace infer {

namespace {

using nlohmann::json;

constexpr int64_t kMaxDim = int64_t{1} << 20;     // any width or head count
constexpr int64_t kMaxVocab = int64_t{1} << 24;   // token table rows
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxTokenId = std::numeric_limits<int>::max();

const char* type_name(LayerType t) { return t == LayerType::kFull ? "full_attention" : "sliding_attention"; }

Result<LayerType> parse_layer_type(const json& v, const JsonReader& r, const std::string& key) {
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s == "sliding_attention") return LayerType::kSliding;
    if (s == "full_attention") return LayerType::kFull;
    return r.error(ErrorCode::kUnsupported, key + " is \"" + s +
                                                "\"; only sliding_attention and full_attention exist");
  }
  return r.error(ErrorCode::kParse, key + " must be a string, got " + v.type_name());
}

// per_layer_config keys are layer indices as zero-padded decimal strings ("04", "2").
Result<int> parse_layer_index(const std::string& key, int num_layers, const JsonReader& r) {
  int64_t v = 0;
  bool ok = !key.empty() && key.size() <= 9;
  for (char ch : key) {
    ok = ok && ch >= '0' && ch <= '9';
    if (ok) v = v * 10 + (ch - '0');
  }
  if (!ok || v >= num_layers) {
    return r.error(ErrorCode::kParse, "per_layer_config key \"" + key +
                                          "\" is not a layer index below num_hidden_layers " +
                                          std::to_string(num_layers));
  }
  return int(v);
}

// rope_parameters[type] (§3.3): absent keys take that type's default; only default/proportional.
Result<void> read_rope(const JsonReader& r, const json& rope_params, LayerType t, RopeParams* out) {
  const std::string key = std::string("rope_parameters.") + type_name(t);
  auto it = rope_params.find(type_name(t));
  if (it == rope_params.end() || it->is_null()) return Ok{};
  if (!it->is_object()) return r.error(ErrorCode::kParse, key + " must be an object");
  JsonReader sub = r.child(*it, key + ".");
  INFER_TRY_VOID(sub.read_string("rope_type", &out->rope_type));
  if (out->rope_type != "default" && out->rope_type != "proportional") {
    return r.error(ErrorCode::kUnsupported, key + ".rope_type \"" + out->rope_type +
                                                "\" is not supported (only default and proportional)");
  }
  INFER_TRY_VOID(sub.read_double("rope_theta", 1e-6, 1e30, &out->rope_theta));
  INFER_TRY_VOID(sub.read_double("partial_rotary_factor", 0.0, 1.0, &out->partial_rotary_factor));
  INFER_TRY_VOID(sub.read_double("factor", 1e-6, 1e6, &out->factor));
  return Ok{};
}

// Reads every §3.1 field of the text config.
Result<void> read_text_fields(const JsonReader& r, TextConfig* c) {
  INFER_TRY_VOID(r.read_int("vocab_size", 1, kMaxVocab, &c->vocab_size));
  INFER_TRY_VOID(r.read_int("hidden_size", 1, kMaxDim, &c->hidden_size));
  INFER_TRY_VOID(r.read_int("intermediate_size", 1, kMaxDim, &c->intermediate_size));
  INFER_TRY_VOID(r.read_int("num_hidden_layers", 1, kMaxLayers, &c->num_hidden_layers));
  INFER_TRY_VOID(r.read_int("num_attention_heads", 1, kMaxDim, &c->num_attention_heads));
  INFER_TRY_VOID(r.read_int("num_key_value_heads", 1, kMaxDim, &c->num_key_value_heads));
  INFER_TRY_VOID(r.read_int("head_dim", 1, kMaxDim, &c->head_dim));
  INFER_TRY_VOID(r.read_string("hidden_activation", &c->hidden_activation));
  if (c->hidden_activation != "gelu_pytorch_tanh") {
    return r.error(ErrorCode::kUnsupported, "hidden_activation \"" + c->hidden_activation +
                                                "\" is not supported (only gelu_pytorch_tanh)");
  }
  INFER_TRY_VOID(r.read_double("rms_norm_eps", 1e-30, 1.0, &c->rms_norm_eps));
  INFER_TRY_VOID(r.read_int("sliding_window", 1, std::numeric_limits<int>::max(), &c->sliding_window));
  INFER_TRY_VOID(r.read_optional_double("final_logit_softcapping", 1e-6, 1e30,
                                        &c->final_logit_softcapping));
  if (r.has_null("hidden_size_per_layer_input")) {
    return r.error(ErrorCode::kParse,
                   "hidden_size_per_layer_input is null; use 0 to disable per-layer embeddings");
  }
  INFER_TRY_VOID(r.read_int("hidden_size_per_layer_input", 0, kMaxDim, &c->hidden_size_per_layer_input));
  INFER_TRY_VOID(r.read_int("vocab_size_per_layer_input", 1, kMaxVocab, &c->vocab_size_per_layer_input));
  INFER_TRY_VOID(r.read_bool("attention_k_eq_v", &c->attention_k_eq_v));
  INFER_TRY_VOID(r.read_int("num_kv_shared_layers", 0, kMaxLayers, &c->num_kv_shared_layers));
  INFER_TRY_VOID(r.read_bool("use_double_wide_mlp", &c->use_double_wide_mlp));
  INFER_TRY_VOID(r.read_bool("enable_moe_block", &c->enable_moe_block));
  INFER_TRY_VOID(r.read_int("num_experts", 1, kMaxDim, &c->num_experts));
  INFER_TRY_VOID(r.read_int("top_k_experts", 1, kMaxDim, &c->top_k_experts));
  INFER_TRY_VOID(r.read_int("moe_intermediate_size", 1, kMaxDim, &c->moe_intermediate_size));
  INFER_TRY_VOID(r.read_bool("attention_bias", &c->attention_bias));
  INFER_TRY_VOID(r.read_int("max_position_embeddings", 1, std::numeric_limits<int64_t>::max(),
                            &c->max_position_embeddings));
  INFER_TRY_VOID(r.read_int("pad_token_id", 0, kMaxTokenId, &c->pad_token_id));
  INFER_TRY_VOID(r.read_int("bos_token_id", 0, kMaxTokenId, &c->bos_token_id));
  INFER_TRY_VOID(r.read_token_ids("eos_token_id", &c->eos_token_id));

  std::string bidir;
  INFER_TRY_VOID(r.read_string("use_bidirectional_attention", &bidir));
  if (!bidir.empty() && bidir != "vision") {
    return r.error(ErrorCode::kUnsupported,
                   "use_bidirectional_attention \"" + bidir +
                       "\" is not a causal language model (only null or \"vision\" are supported)");
  }
  if (c->num_kv_shared_layers > c->num_hidden_layers) {
    return r.error(ErrorCode::kParse, "num_kv_shared_layers " + std::to_string(c->num_kv_shared_layers) +
                                          " exceeds num_hidden_layers " +
                                          std::to_string(c->num_hidden_layers));
  }
  if (c->enable_moe_block) {
    if (c->num_experts == 0 || c->top_k_experts == 0 || c->moe_intermediate_size == 0) {
      return r.error(ErrorCode::kParse,
                     "enable_moe_block needs num_experts, top_k_experts and moe_intermediate_size");
    }
    if (c->top_k_experts > c->num_experts) {
      return r.error(ErrorCode::kParse, "top_k_experts " + std::to_string(c->top_k_experts) +
                                            " exceeds num_experts " + std::to_string(c->num_experts));
    }
  }

  c->rope_full.rope_type = "proportional";
  c->rope_full.rope_theta = 1e6;
  c->rope_full.partial_rotary_factor = 0.25;
  const json* rope = r.find("rope_parameters");
  if (rope != nullptr && !rope->is_null()) {
    if (!rope->is_object()) return r.error(ErrorCode::kParse, "rope_parameters must be an object");
    if (rope->contains("rope_type") || rope->contains("rope_theta")) {
      return r.error(ErrorCode::kUnsupported,
                     "rope_parameters must be keyed by layer type (sliding_attention, "
                     "full_attention), not one set for all layers");
    }
    INFER_TRY_VOID(read_rope(r, *rope, LayerType::kSliding, &c->rope_sliding));
    INFER_TRY_VOID(read_rope(r, *rope, LayerType::kFull, &c->rope_full));
  }
  return Ok{};
}

// §3.2 steps 1-2: layer types, then head_dim and KV heads per layer.
Result<void> plan_attention(const JsonReader& r, ModelConfig* m) {
  const TextConfig& c = m->text;
  const int L = c.num_hidden_layers;
  m->layers.assign(size_t(L), LayerPlan{});
  const json* types = r.find("layer_types");
  if (types != nullptr && !types->is_null()) {
    if (!types->is_array() || types->size() != size_t(L)) {
      return r.error(ErrorCode::kParse, "layer_types must be a list of num_hidden_layers (" +
                                            std::to_string(L) + ") strings");
    }
    for (int i = 0; i < L; ++i) {
      INFER_TRY(m->layers[size_t(i)].type,
                parse_layer_type((*types)[size_t(i)], r, "layer_types[" + std::to_string(i) + "]"));
    }
  } else {
    for (int i = 0; i < L; ++i) {
      m->layers[size_t(i)].type = (i + 1) % 6 == 0 ? LayerType::kFull : LayerType::kSliding;
    }
  }
  m->layers.back().type = LayerType::kFull;  // HF always forces the last layer to full

  for (LayerPlan& p : m->layers) {
    p.head_dim = c.head_dim;
    p.num_key_value_heads = c.num_key_value_heads;
  }
  const json* plc = r.find("per_layer_config");
  if (plc != nullptr && !plc->is_null()) {
    if (!plc->is_object()) return r.error(ErrorCode::kParse, "per_layer_config must be an object");
    for (const auto& [key, value] : plc->items()) {
      INFER_TRY(int layer, parse_layer_index(key, L, r));
      const std::string where = "per_layer_config." + key;
      if (!value.is_object()) return r.error(ErrorCode::kParse, where + " must be an object");
      for (const auto& [field, unused] : value.items()) {
        if (field != "head_dim" && field != "num_key_value_heads") {
          return r.error(ErrorCode::kUnsupported, where + " has unknown key \"" + field +
                                                      "\" (only head_dim and num_key_value_heads)");
        }
      }
      JsonReader sub = r.child(value, where + ".");
      INFER_TRY_VOID(sub.read_int("head_dim", 1, kMaxDim, &m->layers[size_t(layer)].head_dim));
      INFER_TRY_VOID(sub.read_int("num_key_value_heads", 1, kMaxDim,
                                  &m->layers[size_t(layer)].num_key_value_heads));
    }
    return Ok{};
  }
  int global_head_dim = 512;
  int global_kv_heads = 0;  // 0: null
  INFER_TRY_VOID(r.read_int("global_head_dim", 1, kMaxDim, &global_head_dim));
  INFER_TRY_VOID(r.read_int("num_global_key_value_heads", 1, kMaxDim, &global_kv_heads));
  for (LayerPlan& p : m->layers) {
    if (p.type != LayerType::kFull) continue;
    p.head_dim = global_head_dim;
    if (c.attention_k_eq_v && global_kv_heads > 0) p.num_key_value_heads = global_kv_heads;
  }
  return Ok{};
}

// §3.2 steps 3-5 (KV sharing, K = V, MLP width) and per-layer sanity checks.
Result<void> plan_sharing(const JsonReader& r, ModelConfig* m) {
  const TextConfig& c = m->text;
  const int L = c.num_hidden_layers;
  m->first_kv_shared = L - c.num_kv_shared_layers;
  for (int i = 0; i < L; ++i) {
    LayerPlan& p = m->layers[size_t(i)];
    const std::string at = "layer " + std::to_string(i) + " (" + type_name(p.type) + ")";
    if (p.head_dim % 2 != 0) {
      return r.error(ErrorCode::kParse, at + ": head_dim " + std::to_string(p.head_dim) +
                                            " must be even (RoPE rotates pairs)");
    }
    if (c.num_attention_heads % p.num_key_value_heads != 0) {
      return r.error(ErrorCode::kParse, at + ": num_attention_heads " +
                                            std::to_string(c.num_attention_heads) +
                                            " is not a multiple of its " +
                                            std::to_string(p.num_key_value_heads) + " KV heads");
    }
    p.kv_shared = c.num_kv_shared_layers > 0 && i >= m->first_kv_shared;
    p.kv_source = i;
    if (p.kv_shared) {
      int donor = -1;
      for (int j = 0; j < m->first_kv_shared; ++j) {
        if (m->layers[size_t(j)].type == p.type) donor = j;
      }
      if (donor < 0) {
        return r.error(ErrorCode::kParse, at + " is KV-shared but no layer below " +
                                              std::to_string(m->first_kv_shared) + " is " +
                                              type_name(p.type) + " to donate its K/V");
      }
      LayerPlan& d = m->layers[size_t(donor)];
      if (d.head_dim != p.head_dim || d.num_key_value_heads != p.num_key_value_heads) {
        return r.error(ErrorCode::kParse,
                       at + " reads layer " + std::to_string(donor) + "'s K/V but has head_dim " +
                           std::to_string(p.head_dim) + " x " + std::to_string(p.num_key_value_heads) +
                           " heads, the donor " + std::to_string(d.head_dim) + " x " +
                           std::to_string(d.num_key_value_heads));
      }
      p.kv_source = donor;
      d.is_donor = true;
    }
    p.k_eq_v = c.attention_k_eq_v && p.type == LayerType::kFull;
    p.mlp_intermediate = c.intermediate_size * (c.use_double_wide_mlp && p.kv_shared ? 2 : 1);
  }
  return Ok{};
}

Result<std::string> read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::kIo, path.string() + ": cannot open for reading");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return make_error(ErrorCode::kIo, path.string() + ": read failed");
  return ss.str();
}

}  // namespace

Result<ModelConfig> parse_config(std::string_view json_text, std::string_view where) {
  INFER_TRY(json root, parse_json_object(json_text, where));
  JsonReader top(root, where, "");
  std::string model_type;
  INFER_TRY_VOID(top.read_string("model_type", &model_type));
  ModelConfig m;
  m.is_wrapper = root.contains("text_config");
  const json* tc = &root;
  if (m.is_wrapper) {
    if (model_type != "gemma4") {
      return top.error(ErrorCode::kUnsupported, "model_type \"" + model_type +
                                                    "\" is not supported (want gemma4 with text_config)");
    }
    tc = &root["text_config"];
    if (!tc->is_object()) return top.error(ErrorCode::kParse, "text_config must be an object");
  }
  JsonReader r(*tc, where, m.is_wrapper ? "text_config." : "");
  std::string text_type = m.is_wrapper ? "gemma4_text" : model_type;
  INFER_TRY_VOID(r.read_string("model_type", &text_type));
  if (text_type != "gemma4_text") {
    return r.error(ErrorCode::kUnsupported, "model_type \"" + text_type +
                                                "\" is not supported (this engine runs gemma4_text)");
  }
  INFER_TRY_VOID(read_text_fields(r, &m.text));
  INFER_TRY_VOID(plan_attention(r, &m));
  INFER_TRY_VOID(plan_sharing(r, &m));
  return m;
}

Result<ModelConfig> load_config(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return make_error(ErrorCode::kNotFound, path.string() + ": no such file (is " + dir.string() +
                                                " a Gemma 4 checkpoint directory?)");
  }
  INFER_TRY(std::string text, read_text_file(path));
  return parse_config(text, path.string());
}

Result<GenerationConfig> parse_generation_config(std::string_view json_text, std::string_view where) {
  INFER_TRY(json root, parse_json_object(json_text, where));
  JsonReader r(root, where, "");
  GenerationConfig g;
  double temperature = -1.0, top_p = -1.0;
  int top_k = -1;
  bool do_sample = false;
  INFER_TRY_VOID(r.read_double("temperature", 0.0, 1e6, &temperature));
  INFER_TRY_VOID(r.read_double("top_p", 0.0, 1.0, &top_p));
  INFER_TRY_VOID(r.read_int("top_k", 0, kMaxVocab, &top_k));
  if (temperature >= 0.0) g.temperature = float(temperature);
  if (top_p >= 0.0) g.top_p = float(top_p);
  if (top_k >= 0) g.top_k = top_k;
  if (r.has_value("do_sample")) {
    INFER_TRY_VOID(r.read_bool("do_sample", &do_sample));
    g.do_sample = do_sample;
  }
  INFER_TRY_VOID(r.read_token_ids("eos_token_id", &g.eos_token_id));
  return g;
}

Result<GenerationConfig> load_generation_config(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "generation_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return GenerationConfig{};
  INFER_TRY(std::string text, read_text_file(path));
  return parse_generation_config(text, path.string());
}

std::vector<float> rope_inv_freq(const RopeParams& rope, int head_dim) {
  // §4.6 as HF computes it in fp32: e = f32(2j) / f32(d), inv = 1 / f32(theta^e). This matches
  // golden.json's tables bit for bit; all-double (check_spec.py) differs by 1 ulp in 14 of 48.
  const int half = head_dim / 2;
  int n_rot = half;
  float factor = 1.0f;
  if (rope.rope_type == "proportional") {
    n_rot = int(std::floor(rope.partial_rotary_factor * head_dim / 2.0));
    n_rot = std::min(std::max(n_rot, 0), half);
    factor = float(rope.factor);
  }
  const float theta = float(rope.rope_theta);
  std::vector<float> out(size_t(half), 0.0f);
  for (int j = 0; j < n_rot; ++j) {
    const float e = float(2 * j) / float(head_dim);
    const float p = float(std::pow(double(theta), double(e)));  // correctly rounded powf
    out[size_t(j)] = (1.0f / p) / factor;
  }
  return out;
}

}  // namespace infer
