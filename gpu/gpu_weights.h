// The model's weights on the device (DESIGN.md §7): every projection exactly as loaded (bf16/f32
// as stored, or the Q8_0/Q4_0 copies; a layer's q/k/v stacked into one), all f32 vectors (norms, router scales, RoPE inverse
// frequencies) packed into one buffer. The PLE token table stays in host memory (§4.3): the host
// gathers a chunk's rows before each submit.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "base/result.h"
#include "gpu/buffer.h"
#include "gpu/ops/matvec.h"
#include "gpu/ops/moe.h"
#include "gpu/recorder.h"
#include "model/config.h"
#include "model/weights.h"

namespace infer::gpu {

class VulkanContext;

// One decoder layer (GEMMA4_TEXT.md §4.4). A GpuMatrix with rows == 0 is absent (as in
// LayerWeights); a Binding with buffer == nullptr likewise.
struct GpuLayerWeights {
  Binding input_layernorm, post_attention_layernorm;    // [H]
  Binding pre_feedforward_layernorm, post_feedforward_layernorm;  // [H]
  // q_proj, k_proj and v_proj stacked by rows, so one matvec of h writes a token's
  // [q | k | v] row: [n_q·d + n_kv·d + n_kv·d, H]. KV-shared layers have q alone; K=V layers
  // no v rows (V is the raw k projection, §4.5). Rows as loaded, bytes as model/matrix.h.
  GpuMatrix qkv_proj;
  uint32_t qkv_k_offset = 0, qkv_v_offset = 0;  // row of the first k / v output (v == k: K=V)
  GpuMatrix o_proj;
  Binding q_norm, k_norm;  // [d]; k_norm absent on KV-shared layers
  Binding inv_freq;        // [d/2] of the layer's RoPE type (§4.6)
  GpuMatrix gate_proj, up_proj, down_proj;
  GpuMatrix per_layer_input_gate, per_layer_projection;  // PLE block, P > 0
  Binding post_per_layer_input_norm;                     // [H]
  // MoE (§4.9).
  GpuMatrix router_proj;
  Binding router_scale, router_per_expert_scale;  // [H], [E]
  Binding pre_feedforward_layernorm_2, post_feedforward_layernorm_1, post_feedforward_layernorm_2;
  GpuExperts expert_gate_up, expert_down;
  float layer_scalar = 1.0f;
};

struct GpuWeights {
  GpuMatrix embed_tokens;  // [V, H] as stored
  GpuMatrix per_layer_model_projection;  // [L·P, H]
  Binding per_layer_projection_norm;     // [P]
  Binding norm;                          // final norm [H]
  std::vector<GpuLayerWeights> layers;
  Buffer vectors;  // every Binding above points into it

  // [V, H]: the tied embedding's buffer when the head is the embedding as stored.
  const GpuMatrix& lm_head() const { return head_is_embedding ? embed_tokens : own_lm_head; }
  GpuMatrix own_lm_head;
  bool head_is_embedding = false;

  size_t bytes = 0;  // device bytes of everything above

  // Bindings point into `vectors`, so the result lives behind a pointer and never moves.
  // With a pool, its threads repack each matrix into the device layout side by side.
  static Result<std::unique_ptr<GpuWeights>> upload(const VulkanContext& ctx,
                                                    const ModelConfig& cfg,
                                                    const ModelWeights& w,
                                                    ThreadPool* pool = nullptr);
};

}  // namespace infer::gpu
