// expected_tensors(): §7's tables derived from the per-layer plan (§3.2); validate_tensors()
// checks a checkpoint against them before anything binds to its bytes.
#include "model/tensor_table.h"

#include "model/safetensors.h"

namespace infer {

namespace {

class TableBuilder {
 public:
  explicit TableBuilder(std::vector<TensorSpec>* out) : out_(out) {}
  void add(std::string name, std::vector<int64_t> shape, TensorKind kind) {
    if (layer_ >= 0) name = "layers." + std::to_string(layer_) + "." + name;
    out_->push_back(TensorSpec{std::move(name), std::move(shape), kind, layer_});
  }
  void set_layer(int layer) { layer_ = layer; }

 private:
  std::vector<TensorSpec>* out_;
  int layer_ = -1;
};

void add_attention(TableBuilder& b, const TextConfig& c, const LayerPlan& p) {
  const int64_t H = c.hidden_size, d = p.head_dim;
  const int64_t q_rows = int64_t(c.num_attention_heads) * d;
  const int64_t kv_rows = int64_t(p.num_key_value_heads) * d;
  const bool has_kv = !p.kv_shared;
  const bool has_v = has_kv && !p.k_eq_v;  // k_eq_v: V comes from k_proj (§3.2 step 4)
  b.add("self_attn.q_proj.weight", {q_rows, H}, TensorKind::kMatrix);
  if (c.attention_bias) b.add("self_attn.q_proj.bias", {q_rows}, TensorKind::kVector);
  b.add("self_attn.q_norm.weight", {d}, TensorKind::kNorm);
  if (has_kv) {
    b.add("self_attn.k_proj.weight", {kv_rows, H}, TensorKind::kMatrix);
    if (c.attention_bias) b.add("self_attn.k_proj.bias", {kv_rows}, TensorKind::kVector);
    b.add("self_attn.k_norm.weight", {d}, TensorKind::kNorm);
  }
  if (has_v) {
    b.add("self_attn.v_proj.weight", {kv_rows, H}, TensorKind::kMatrix);
    if (c.attention_bias) b.add("self_attn.v_proj.bias", {kv_rows}, TensorKind::kVector);
  }
  b.add("self_attn.o_proj.weight", {H, q_rows}, TensorKind::kMatrix);
  if (c.attention_bias) b.add("self_attn.o_proj.bias", {H}, TensorKind::kVector);
}

// The MoE branch (§4.9), beside the dense MLP in every layer when enable_moe_block.
void add_moe(TableBuilder& b, const TextConfig& c) {
  const int64_t H = c.hidden_size, E = c.num_experts, I = c.moe_intermediate_size;
  b.add("router.proj.weight", {E, H}, TensorKind::kMatrix);
  b.add("router.scale", {H}, TensorKind::kVector);
  b.add("router.per_expert_scale", {E}, TensorKind::kVector);
  b.add("experts.gate_up_proj", {E, 2 * I, H}, TensorKind::kExperts);
  b.add("experts.down_proj", {E, H, I}, TensorKind::kExperts);
  b.add("post_feedforward_layernorm_1.weight", {H}, TensorKind::kNorm);
  b.add("post_feedforward_layernorm_2.weight", {H}, TensorKind::kNorm);
  b.add("pre_feedforward_layernorm_2.weight", {H}, TensorKind::kNorm);
}

}  // namespace

const char* tensor_kind_name(TensorKind k) {
  switch (k) {
    case TensorKind::kMatrix: return "matrix";
    case TensorKind::kEmbedding: return "embedding";
    case TensorKind::kNorm: return "norm";
    case TensorKind::kScalar: return "scalar";
    case TensorKind::kExperts: return "experts";
    case TensorKind::kVector: return "vector";
  }
  return "?";
}

std::string shape_string(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::vector<TensorSpec> expected_tensors(const ModelConfig& cfg) {
  const TextConfig& c = cfg.text;
  const int64_t H = c.hidden_size, P = c.hidden_size_per_layer_input;
  const int64_t L = c.num_hidden_layers;
  std::vector<TensorSpec> out;
  TableBuilder b(&out);
  b.add("embed_tokens.weight", {c.vocab_size, H}, TensorKind::kEmbedding);
  if (P > 0) {  // per-layer embeddings (§4.3): all layers' P-wide rows side by side
    b.add("embed_tokens_per_layer.weight", {c.vocab_size_per_layer_input, L * P},
          TensorKind::kEmbedding);
    b.add("per_layer_model_projection.weight", {L * P, H}, TensorKind::kMatrix);
    b.add("per_layer_projection_norm.weight", {P}, TensorKind::kNorm);
  }
  b.add("norm.weight", {H}, TensorKind::kNorm);
  for (int i = 0; i < int(L); ++i) {
    const LayerPlan& p = cfg.layers[size_t(i)];
    const int64_t I = p.mlp_intermediate;
    b.set_layer(i);
    b.add("input_layernorm.weight", {H}, TensorKind::kNorm);
    add_attention(b, c, p);
    b.add("post_attention_layernorm.weight", {H}, TensorKind::kNorm);
    b.add("pre_feedforward_layernorm.weight", {H}, TensorKind::kNorm);
    b.add("mlp.gate_proj.weight", {I, H}, TensorKind::kMatrix);
    b.add("mlp.up_proj.weight", {I, H}, TensorKind::kMatrix);
    b.add("mlp.down_proj.weight", {H, I}, TensorKind::kMatrix);
    b.add("post_feedforward_layernorm.weight", {H}, TensorKind::kNorm);
    if (c.enable_moe_block) add_moe(b, c);
    if (P > 0) {
      b.add("per_layer_input_gate.weight", {P, H}, TensorKind::kMatrix);
      b.add("per_layer_projection.weight", {H, P}, TensorKind::kMatrix);
      b.add("post_per_layer_input_norm.weight", {H}, TensorKind::kNorm);
    }
    b.add("layer_scalar", {1}, TensorKind::kScalar);
  }
  return out;
}

Result<void> validate_tensors(const ModelConfig& cfg, const TensorStore& store) {
  std::vector<TensorSpec> want = expected_tensors(cfg);
  want.push_back(TensorSpec{"lm_head.weight", {cfg.text.vocab_size, cfg.text.hidden_size},
                            TensorKind::kEmbedding, -1});
  for (size_t i = 0; i < want.size(); ++i) {
    const TensorSpec& s = want[i];
    const TensorView* t = store.find(s.name);
    if (t == nullptr) {
      if (i + 1 == want.size()) break;  // lm_head is optional: tied to embed_tokens (§2)
      return make_error(ErrorCode::kNotFound, "checkpoint has no tensor \"" + s.name + "\" (" +
                                                  tensor_kind_name(s.kind) + " " +
                                                  shape_string(s.shape) + ")");
    }
    if (t->shape != s.shape) {
      return make_error(ErrorCode::kShape, "tensor \"" + s.name + "\" has shape " +
                                               shape_string(t->shape) + ", the config implies " +
                                               shape_string(s.shape));
    }
  }
  return Ok{};
}

}  // namespace infer
