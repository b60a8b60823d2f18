// Upload of ModelWeights: one device buffer per matrix (bytes as in model/matrix.h; a layer's
// q/k/v rows stacked into one), one per stacked expert set, and one packed buffer of f32 vectors whose ranges the layers bind.
#include "gpu/gpu_weights.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/progress.h"
#include "gpu/context.h"

namespace infer::gpu {
namespace {

// Collects f32 vectors at offsets the device can bind, then uploads them as one buffer and
// points every requested Binding at its range.
class VectorPacker {
 public:
  explicit VectorPacker(VkDeviceSize align_bytes)
      : align_floats_(std::max<size_t>(1, size_t(align_bytes) / sizeof(float))) {}

  void add(Binding* target, const float* v, size_t n) {
    if (v == nullptr || n == 0) return;  // absent: the Binding stays empty
    data_.resize((data_.size() + align_floats_ - 1) / align_floats_ * align_floats_);
    fixups_.push_back({target, data_.size(), n});
    data_.insert(data_.end(), v, v + n);
  }

  Result<void> upload(const VulkanContext& ctx, Buffer& buffer) {
    if (data_.empty()) data_.push_back(0.0f);  // a valid (unused) buffer all the same
    INFER_TRY(buffer, Buffer::create(ctx, data_.size() * sizeof(float), BufferKind::kDevice,
                                     "weights: norms, scales, inv_freq"));
    INFER_TRY_VOID(upload_bytes(ctx, buffer));
    for (const Fixup& f : fixups_) {
      *f.target = Binding{&buffer, f.offset * sizeof(float), f.n * sizeof(float)};
    }
    return Ok{};
  }

 private:
  Result<void> upload_bytes(const VulkanContext& ctx, Buffer& buffer) {
    return gpu::upload(ctx, buffer, 0, data_.data(), data_.size() * sizeof(float));
  }
  struct Fixup {
    Binding* target;
    size_t offset;  // floats
    size_t n;
  };
  size_t align_floats_;
  std::vector<float> data_;
  std::vector<Fixup> fixups_;
};

// An absent matrix (rows == 0) stays an empty GpuMatrix.
Result<void> upload_if_present(const VulkanContext& ctx, const Matrix& m, const std::string& name,
                               GpuMatrix& out, size_t& bytes, ThreadPool* pool) {
  if (m.rows == 0) return Ok{};
  INFER_TRY(out, upload_matrix(ctx, m, name, pool));
  bytes += out.buffer.size();
  return Ok{};
}

// q_proj, k_proj and v_proj (those present) as one matrix of their rows in that order: the
// formats and widths must agree, as they do for every projection loaded as stored or quantised.
Result<void> upload_qkv(const VulkanContext& ctx, const LayerWeights& lw, const std::string& p,
                        GpuLayerWeights& g, size_t& bytes, ThreadPool* pool) {
  const Matrix* parts[3] = {&lw.q_proj, &lw.k_proj, &lw.v_proj};
  std::vector<uint8_t> data;
  Matrix stacked{lw.q_proj.format, 0, lw.q_proj.cols, nullptr};
  for (int i = 0; i < 3; ++i) {
    const Matrix& m = *parts[i];
    if (m.rows == 0) {
      if (i == 2) g.qkv_v_offset = g.qkv_k_offset;  // K=V or KV-shared: no v rows
      continue;
    }
    if (m.format != stacked.format || m.cols != stacked.cols) {
      return make_error(ErrorCode::kUnsupported,
                        p + "q/k/v_proj: " + weight_format_name(m.format) + " [" +
                            std::to_string(m.rows) + ", " + std::to_string(m.cols) +
                            "] cannot be stacked under q_proj's " +
                            weight_format_name(stacked.format) + " [.., " +
                            std::to_string(stacked.cols) + "]");
    }
    if (i == 1) g.qkv_k_offset = uint32_t(stacked.rows);
    if (i == 2) g.qkv_v_offset = uint32_t(stacked.rows);
    data.insert(data.end(), m.data, m.data + m.nbytes());
    stacked.rows += m.rows;
  }
  if (lw.k_proj.rows == 0) g.qkv_k_offset = g.qkv_v_offset = uint32_t(stacked.rows);
  stacked.data = data.data();
  return upload_if_present(ctx, stacked, p + "qkv_proj", g.qkv_proj, bytes, pool);
}

Result<void> upload_layer(const VulkanContext& ctx, const ModelConfig& cfg, const LayerWeights& lw,
                          int i, GpuLayerWeights& g, size_t& bytes, ThreadPool* pool) {
  const std::string p = "layers." + std::to_string(i) + ".";
  INFER_TRY_VOID(upload_qkv(ctx, lw, p, g, bytes, pool));
  INFER_TRY_VOID(upload_if_present(ctx, lw.o_proj, p + "o_proj", g.o_proj, bytes, pool));
  INFER_TRY_VOID(upload_if_present(ctx, lw.gate_proj, p + "gate_proj", g.gate_proj, bytes, pool));
  INFER_TRY_VOID(upload_if_present(ctx, lw.up_proj, p + "up_proj", g.up_proj, bytes, pool));
  INFER_TRY_VOID(upload_if_present(ctx, lw.down_proj, p + "down_proj", g.down_proj, bytes, pool));
  INFER_TRY_VOID(upload_if_present(ctx, lw.per_layer_input_gate, p + "per_layer_input_gate",
                                   g.per_layer_input_gate, bytes, pool));
  INFER_TRY_VOID(upload_if_present(ctx, lw.per_layer_projection, p + "per_layer_projection",
                                   g.per_layer_projection, bytes, pool));
  if (cfg.text.enable_moe_block) {
    INFER_TRY_VOID(upload_if_present(ctx, lw.router_proj, p + "router.proj", g.router_proj, bytes, pool));
    INFER_TRY(g.expert_gate_up, upload_experts(ctx, lw.expert_gate_up, p + "experts.gate_up", pool));
    INFER_TRY(g.expert_down, upload_experts(ctx, lw.expert_down, p + "experts.down", pool));
    bytes += g.expert_gate_up.buffer.size() + g.expert_down.buffer.size();
  }
  g.layer_scalar = lw.layer_scalar;
  return Ok{};
}

}  // namespace

Result<std::unique_ptr<GpuWeights>> GpuWeights::upload(const VulkanContext& ctx,
                                                       const ModelConfig& cfg,
                                                       const ModelWeights& w,
                                                       ThreadPool* pool) {
  const TextConfig& tc = cfg.text;
  const size_t H = size_t(tc.hidden_size), P = size_t(tc.hidden_size_per_layer_input);
  const size_t L = size_t(tc.num_hidden_layers);
  if (w.layers.size() != L || cfg.layers.size() != L) {
    return make_error(ErrorCode::kShape, "gpu weights: " + std::to_string(w.layers.size()) +
                                             " bound layers for a config of " + std::to_string(L));
  }
  ProgressStage stage("uploading weights to the GPU", int64_t(L), "layers");
  auto g = std::make_unique<GpuWeights>();
  g->layers.resize(L);  // fixed size before the packer keeps pointers into it
  size_t& bytes = g->bytes;

  INFER_TRY(g->embed_tokens, upload_matrix(ctx, w.embed_tokens, "embed_tokens", pool));
  bytes += g->embed_tokens.buffer.size();
  // The tied head (the embedding as stored) is read from the embedding's buffer.
  g->head_is_embedding = w.lm_head.data == w.embed_tokens.data &&
                         w.lm_head.format == w.embed_tokens.format;
  if (!g->head_is_embedding) {
    INFER_TRY(g->own_lm_head, upload_matrix(ctx, w.lm_head, "lm_head", pool));
    bytes += g->own_lm_head.buffer.size();
  }
  if (P > 0) {
    INFER_TRY(g->per_layer_model_projection,
              upload_matrix(ctx, w.per_layer_model_projection, "per_layer_model_projection",
                            pool));
    bytes += g->per_layer_model_projection.buffer.size();
  }

  VectorPacker vec(ctx.info().min_storage_buffer_offset_alignment);
  vec.add(&g->norm, w.norm, H);
  vec.add(&g->per_layer_projection_norm, w.per_layer_projection_norm, P);
  // One inv_freq table per (layer type, head dim), as the CPU's RopeTables.
  std::map<std::pair<LayerType, int>, std::vector<float>> inv_freq;
  for (size_t i = 0; i < L; ++i) {
    const LayerWeights& lw = w.layers[i];
    const LayerPlan& plan = cfg.layers[i];
    GpuLayerWeights& gl = g->layers[i];
    INFER_TRY_VOID(upload_layer(ctx, cfg, lw, int(i), gl, bytes, pool));
    stage.advance(int64_t(i) + 1);
    const size_t d = size_t(plan.head_dim);
    vec.add(&gl.input_layernorm, lw.input_layernorm, H);
    vec.add(&gl.post_attention_layernorm, lw.post_attention_layernorm, H);
    vec.add(&gl.pre_feedforward_layernorm, lw.pre_feedforward_layernorm, H);
    vec.add(&gl.post_feedforward_layernorm, lw.post_feedforward_layernorm, H);
    vec.add(&gl.q_norm, lw.q_norm, d);
    vec.add(&gl.k_norm, lw.k_norm, d);
    vec.add(&gl.post_per_layer_input_norm, lw.post_per_layer_input_norm, H);
    if (tc.enable_moe_block) {
      vec.add(&gl.router_scale, lw.router_scale, H);
      vec.add(&gl.router_per_expert_scale, lw.router_per_expert_scale, size_t(tc.num_experts));
      vec.add(&gl.pre_feedforward_layernorm_2, lw.pre_feedforward_layernorm_2, H);
      vec.add(&gl.post_feedforward_layernorm_1, lw.post_feedforward_layernorm_1, H);
      vec.add(&gl.post_feedforward_layernorm_2, lw.post_feedforward_layernorm_2, H);
    }
    auto [it, fresh] = inv_freq.try_emplace({plan.type, plan.head_dim});
    if (fresh) it->second = rope_inv_freq(cfg.rope(plan.type), plan.head_dim);
    vec.add(&gl.inv_freq, it->second.data(), it->second.size());
  }
  INFER_TRY_VOID(vec.upload(ctx, g->vectors));
  bytes += g->vectors.size();
  return g;
}

}  // namespace infer::gpu
