// Binds checkpoint tensors to ModelWeights (GEMMA4_TEXT.md §2, §7): views into the mmap for
// bf16/f32 projections, owned f32 for norms and f16 tensors, owned GGML blocks when quantizing.
#include "model/weights.h"

#include <sys/mman.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "base/check.h"
#include "base/half.h"
#include "base/progress.h"
#include "model/safetensors.h"
#include "model/tensor_table.h"
#include "model/thread_pool.h"

namespace infer {

void ModelWeights::FreeBytes::operator()(uint8_t* p) const { std::free(p); }

namespace {

// Quantized matrices are streamed whole every token: on 2 MB pages (where the kernel grants them)
// the stream does not stall on a page walk every 4 KB, which in a VM is a nested, costly walk.
uint8_t* alloc_streamed(size_t n) {
  constexpr size_t kHugePage = size_t(2) << 20;
  const size_t bytes = (n + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, bytes);
  INFER_CHECK(p != nullptr, "out of memory: %zu bytes for a quantized matrix", bytes);
  madvise(p, bytes, MADV_HUGEPAGE);  // advice only: failure leaves 4 KB pages
  return static_cast<uint8_t*>(p);
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// √n as HF forms it: the scalar cast to the table's dtype (§4.2), so bf16 tables get bf16(√n),
// unless the f32 convention is asked for.
float table_scale(int64_t n, WeightFormat table, EmbedScale how) {
  const float s = float(std::sqrt(double(n)));
  const bool round = how == EmbedScale::kTableDtype && table == WeightFormat::kBF16;
  return round ? bf16_to_f32(f32_to_bf16(s)) : s;
}

class Binder {
 public:
  Binder(const TensorStore& store, ModelWeights& w, Quant quant, ThreadPool& pool)
      : store_(store), w_(w), quant_(quant), pool_(pool) {}

  // The tensor `name` with exactly `shape`, or a kNotFound / kShape error.
  Result<const TensorView*> get(const std::string& name, const std::vector<int64_t>& shape) {
    const TensorView* t = store_.find(name);
    if (t == nullptr) return make_error(ErrorCode::kNotFound, "tensor \"" + name + "\" is missing");
    if (t->shape != shape) {
      return make_error(ErrorCode::kShape, "tensor \"" + name + "\" has shape " +
                                               shape_str(t->shape) + ", expected " +
                                               shape_str(shape));
    }
    return t;
  }

  // f32 copy of a [n] vector (norm weights, scales).
  Result<const float*> vec(const std::string& name, int64_t n) {
    INFER_TRY(const TensorView* t, get(name, {n}));
    std::vector<float>& out = w_.owned_f32.emplace_back(size_t(n));
    widen(*t, out.data(), n);
    w_.norm_bytes += size_t(n) * sizeof(float);
    return static_cast<const float*>(out.data());
  }

  Result<float> scalar(const std::string& name) {
    INFER_TRY(const TensorView* t, get(name, {1}));
    float v = 0.0f;
    widen(*t, &v, 1);
    return v;
  }

  // A [rows, cols] (or [n, rows/n, cols] for experts) tensor as a Matrix in `want` format:
  // kBF16/kF32 keep the stored bytes (f16 is widened to f32); Q8_0/Q4_0 quantize when cols allows.
  Result<Matrix> matrix(const std::string& name, std::vector<int64_t> shape, WeightFormat want) {
    INFER_TRY(const TensorView* t, get(name, shape));
    const int64_t cols = shape.back();
    const int64_t rows = t->nbytes / (dtype_size(t->dtype) * size_t(cols));
    Matrix m = stored(*t, rows, cols);
    const bool quantized = want == WeightFormat::kQ8_0 || want == WeightFormat::kQ4_0;
    if (!quantized) return m;
    // GGML blocks cover 32 weights of a row; other widths stay as stored (fixture H=144, P=16).
    if (cols % 32 != 0) {
      ++w_.unquantized_matrices;
      return m;
    }
    const size_t n = size_t(rows) * row_bytes(want, cols);
    uint8_t* dst = w_.owned_bytes.emplace_back(alloc_streamed(n)).get();
    quantize_matrix(m, want, dst, pool_);
    return Matrix{want, rows, cols, dst};
  }

  WeightFormat projection_format() const {
    switch (quant_) {
      case Quant::kQ8_0:
        return WeightFormat::kQ8_0;
      case Quant::kQ4_0:
        return WeightFormat::kQ4_0;
      case Quant::kAsStored:
        break;
    }
    return WeightFormat::kBF16;  // stands for "as stored"
  }
  WeightFormat head_format() const {
    return quant_ == Quant::kAsStored ? WeightFormat::kBF16 : WeightFormat::kQ8_0;
  }

 private:
  // The stored bytes as a Matrix; f16 (and misaligned f32) become an owned f32 copy.
  Matrix stored(const TensorView& t, int64_t rows, int64_t cols) {
    if (t.dtype == DType::kBF16) return Matrix{WeightFormat::kBF16, rows, cols, t.data};
    if (t.dtype == DType::kF32 && reinterpret_cast<uintptr_t>(t.data) % alignof(float) == 0) {
      return Matrix{WeightFormat::kF32, rows, cols, t.data};
    }
    std::vector<float>& out = w_.owned_f32.emplace_back(size_t(rows * cols));
    widen(t, out.data(), rows * cols);
    return Matrix{WeightFormat::kF32, rows, cols, reinterpret_cast<const uint8_t*>(out.data())};
  }

  static void widen(const TensorView& t, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h = 0;
      switch (t.dtype) {
        case DType::kBF16:
          std::memcpy(&h, t.data + 2 * i, 2);
          out[i] = bf16_to_f32(h);
          break;
        case DType::kF16:
          std::memcpy(&h, t.data + 2 * i, 2);
          out[i] = fp16_to_f32(h);
          break;
        case DType::kF32:
          std::memcpy(&out[i], t.data + 4 * i, 4);
          break;
      }
    }
  }

  const TensorStore& store_;
  ModelWeights& w_;
  Quant quant_;
  ThreadPool& pool_;
};

Result<void> bind_layer(const ModelConfig& cfg, int i, Binder& b, LayerWeights& lw) {
  const TextConfig& tc = cfg.text;
  const LayerPlan& plan = cfg.layers[size_t(i)];
  const int64_t H = tc.hidden_size, P = tc.hidden_size_per_layer_input;
  const int64_t n_q = tc.num_attention_heads, n_kv = plan.num_key_value_heads, d = plan.head_dim;
  const int64_t I = plan.mlp_intermediate;
  const std::string p = "layers." + std::to_string(i) + ".";
  const WeightFormat proj = b.projection_format();

  INFER_TRY(lw.input_layernorm, b.vec(p + "input_layernorm.weight", H));
  INFER_TRY(lw.post_attention_layernorm, b.vec(p + "post_attention_layernorm.weight", H));
  INFER_TRY(lw.pre_feedforward_layernorm, b.vec(p + "pre_feedforward_layernorm.weight", H));
  INFER_TRY(lw.post_feedforward_layernorm, b.vec(p + "post_feedforward_layernorm.weight", H));

  INFER_TRY(lw.q_proj, b.matrix(p + "self_attn.q_proj.weight", {n_q * d, H}, proj));
  INFER_TRY(lw.q_norm, b.vec(p + "self_attn.q_norm.weight", d));
  if (!plan.kv_shared) {  // shared layers' k/v tensors, if present, are ignored (§2)
    INFER_TRY(lw.k_proj, b.matrix(p + "self_attn.k_proj.weight", {n_kv * d, H}, proj));
    INFER_TRY(lw.k_norm, b.vec(p + "self_attn.k_norm.weight", d));
    if (!plan.k_eq_v) {
      INFER_TRY(lw.v_proj, b.matrix(p + "self_attn.v_proj.weight", {n_kv * d, H}, proj));
    }
  }
  INFER_TRY(lw.o_proj, b.matrix(p + "self_attn.o_proj.weight", {H, n_q * d}, proj));

  INFER_TRY(lw.gate_proj, b.matrix(p + "mlp.gate_proj.weight", {I, H}, proj));
  INFER_TRY(lw.up_proj, b.matrix(p + "mlp.up_proj.weight", {I, H}, proj));
  INFER_TRY(lw.down_proj, b.matrix(p + "mlp.down_proj.weight", {H, I}, proj));

  if (P > 0) {
    INFER_TRY(lw.per_layer_input_gate, b.matrix(p + "per_layer_input_gate.weight", {P, H}, proj));
    INFER_TRY(lw.per_layer_projection, b.matrix(p + "per_layer_projection.weight", {H, P}, proj));
    INFER_TRY(lw.post_per_layer_input_norm, b.vec(p + "post_per_layer_input_norm.weight", H));
  }

  if (tc.enable_moe_block) {
    const int64_t E = tc.num_experts, Im = tc.moe_intermediate_size;
    // The router stays as stored: quantizing it could flip experts whose margins are ~1e-3.
    INFER_TRY(lw.router_proj, b.matrix(p + "router.proj.weight", {E, H}, WeightFormat::kBF16));
    INFER_TRY(lw.router_scale, b.vec(p + "router.scale", H));
    INFER_TRY(lw.router_per_expert_scale, b.vec(p + "router.per_expert_scale", E));
    INFER_TRY(lw.pre_feedforward_layernorm_2, b.vec(p + "pre_feedforward_layernorm_2.weight", H));
    INFER_TRY(lw.post_feedforward_layernorm_1, b.vec(p + "post_feedforward_layernorm_1.weight", H));
    INFER_TRY(lw.post_feedforward_layernorm_2, b.vec(p + "post_feedforward_layernorm_2.weight", H));
    // [E, 2I, H] and [E, H, I]: bound (and quantized) whole, then one Matrix per expert.
    INFER_TRY(Matrix gu, b.matrix(p + "experts.gate_up_proj", {E, 2 * Im, H}, proj));
    INFER_TRY(Matrix dn, b.matrix(p + "experts.down_proj", {E, H, Im}, proj));
    for (int64_t e = 0; e < E; ++e) {
      lw.expert_gate_up.push_back(
          Matrix{gu.format, 2 * Im, H, gu.data + size_t(e * 2 * Im) * gu.stride()});
      lw.expert_down.push_back(Matrix{dn.format, H, Im, dn.data + size_t(e * H) * dn.stride()});
    }
  }
  INFER_TRY(lw.layer_scalar, b.scalar(p + "layer_scalar"));
  return Ok{};
}

}  // namespace

Result<ModelWeights> bind_weights(const ModelConfig& cfg, const TensorStore& store,
                                  const BindOptions& opts, ThreadPool& pool) {
  INFER_TRY_VOID(validate_tensors(cfg, store));
  for (size_t i = 0; i < cfg.layers.size(); ++i) {
    // A shared layer attends over its donor's K/V with its own queries (§5): the dims must agree.
    const LayerPlan& p = cfg.layers[i];
    const LayerPlan& donor = cfg.layers[size_t(p.kv_source)];
    if (p.kv_shared && donor.head_dim != p.head_dim) {
      return make_error(ErrorCode::kUnsupported,
                        "layer " + std::to_string(i) + " has head_dim " +
                            std::to_string(p.head_dim) + " but reads the K/V of layer " +
                            std::to_string(p.kv_source) + " with head_dim " +
                            std::to_string(donor.head_dim));
    }
  }
  const TextConfig& tc = cfg.text;
  const int64_t H = tc.hidden_size, P = tc.hidden_size_per_layer_input;
  const int64_t L = tc.num_hidden_layers, V = tc.vocab_size;
  ModelWeights w;
  Binder b(store, w, opts.quant, pool);
  // Quantizing a checkpoint of gigabytes takes seconds: say so while it runs (the embedding and
  // head first, then a unit a layer).
  std::optional<ProgressStage> stage;
  if (opts.quant != Quant::kAsStored) {
    stage.emplace(opts.quant == Quant::kQ8_0 ? "quantizing to Q8_0" : "quantizing to Q4_0",
                  L, "layers");
  }

  INFER_TRY(w.embed_tokens, b.matrix("embed_tokens.weight", {V, H}, WeightFormat::kBF16));
  w.embed_scale = table_scale(H, w.embed_tokens.format, opts.embed_scale);
  const bool own_head = store.find("lm_head.weight") != nullptr;
  INFER_TRY(w.lm_head,
            b.matrix(own_head ? "lm_head.weight" : "embed_tokens.weight", {V, H}, b.head_format()));
  if (P > 0) {
    INFER_TRY(w.embed_tokens_per_layer,
              b.matrix("embed_tokens_per_layer.weight", {tc.vocab_size_per_layer_input, L * P},
                       WeightFormat::kBF16));
    w.ple_scale = table_scale(P, w.embed_tokens_per_layer.format, opts.embed_scale);
    INFER_TRY(w.per_layer_model_projection,
              b.matrix("per_layer_model_projection.weight", {L * P, H}, b.projection_format()));
    INFER_TRY(w.per_layer_projection_norm, b.vec("per_layer_projection_norm.weight", P));
  }
  INFER_TRY(w.norm, b.vec("norm.weight", H));

  w.layers.resize(size_t(L));
  for (int i = 0; i < int(L); ++i) {
    INFER_TRY_VOID(bind_layer(cfg, i, b, w.layers[size_t(i)]));
    if (stage) stage->advance(i + 1);
  }
  return w;
}

size_t weights_decode_bytes(const ModelConfig& cfg, const ModelWeights& w) {
  const TextConfig& tc = cfg.text;
  size_t bytes = w.lm_head.nbytes() + w.embed_tokens.stride() + w.norm_bytes;
  if (w.embed_tokens_per_layer.rows > 0) {
    bytes += w.embed_tokens_per_layer.stride() + w.per_layer_model_projection.nbytes();
  }
  for (const LayerWeights& l : w.layers) {
    for (const Matrix* m :
         {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj,
          &l.per_layer_input_gate, &l.per_layer_projection, &l.router_proj}) {
      bytes += m->nbytes();
    }
    // A token reads top_k experts of the layer's E.
    if (!l.expert_gate_up.empty()) {
      bytes +=
          size_t(tc.top_k_experts) * (l.expert_gate_up[0].nbytes() + l.expert_down[0].nbytes());
    }
  }
  return bytes;
}

}  // namespace infer
