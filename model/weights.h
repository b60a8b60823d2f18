// The checkpoint's tensors bound for the forward pass (GEMMA4_TEXT.md §4, §7): projections as
// Matrix views into the mmap (or quantized copies), norms as f32, per-layer scalars.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/result.h"
#include "model/config.h"
#include "model/matrix.h"

namespace infer {

class TensorStore;
class ThreadPool;

// Which weight format the projections get. kAsStored keeps bf16/f32 from the checkpoint (f16 is
// widened to f32); kQ8_0 quantizes every projection and the output head to Q8_0; kQ4_0 ("mixed")
// quantizes projections to Q4_0 and the output head to Q8_0. A matrix whose cols is not a multiple
// of 32 (the GGML block) stays as stored.
enum class Quant { kAsStored, kQ8_0, kQ4_0 };

// How the embedding scales √H and √P are formed (§4.2). HF multiplies by the scalar cast to the
// table's dtype, so a bf16 checkpoint run in bf16 uses bf16(√H) (E2B: 39.25, not 39.19).
// kF32 is what an fp32 run of the same weights uses: the golden fixtures' oracle, which matters
// for e2b-vocab (H 32, P 8: √32 and √8 are not exact in bf16).
enum class EmbedScale { kTableDtype, kF32 };

struct BindOptions {
  Quant quant = Quant::kAsStored;
  EmbedScale embed_scale = EmbedScale::kTableDtype;
};

// One decoder layer (§4.4). Norm vectors are f32 and owned by ModelWeights. A Matrix with rows == 0
// is absent: k/v projections of KV-shared layers, v_proj of k_eq_v layers, PLE and MoE parts of
// models without them.
struct LayerWeights {
  // Stream norms, each [H].
  const float* input_layernorm = nullptr;
  const float* post_attention_layernorm = nullptr;
  const float* pre_feedforward_layernorm = nullptr;
  const float* post_feedforward_layernorm = nullptr;

  // Attention (§4.5): q [n_q·d, H], k/v [n_kv·d, H], o [H, n_q·d]; q_norm/k_norm [d].
  Matrix q_proj, k_proj, v_proj, o_proj;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;  // nullptr on KV-shared layers

  // Dense MLP (§4.8): gate/up [I, H], down [H, I] (I doubled on double-wide layers).
  Matrix gate_proj, up_proj, down_proj;

  // PLE block (§4.4, P > 0): gate [P, H], projection [H, P], norm [H].
  Matrix per_layer_input_gate, per_layer_projection;
  const float* post_per_layer_input_norm = nullptr;

  // MoE (§4.9): router [E, H] (kept as stored: routing margins are small), scale [H],
  // per_expert_scale [E]; expert e: gate_up [2I, H] (gate rows first), down [H, I].
  Matrix router_proj;
  const float* router_scale = nullptr;
  const float* router_per_expert_scale = nullptr;
  const float* pre_feedforward_layernorm_2 = nullptr;
  const float* post_feedforward_layernorm_1 = nullptr;
  const float* post_feedforward_layernorm_2 = nullptr;
  std::vector<Matrix> expert_gate_up;
  std::vector<Matrix> expert_down;

  float layer_scalar = 1.0f;  // multiplies the whole stream after the PLE block
};

struct ModelWeights {
  Matrix embed_tokens;       // [V, H] as stored (f16 widened); row lookups only (§4.2)
  float embed_scale = 1.0f;  // √H, rounded to the table's dtype unless EmbedScale::kF32 (§4.2)
  Matrix lm_head;  // [V, H]: lm_head.weight, else the tied embedding (quantized copy when asked)

  // PLE (§4.3), present when P > 0.
  Matrix embed_tokens_per_layer;      // [Vp, L·P] as stored; row lookups only, stays in the mmap
  float ple_scale = 1.0f;             // √P, rounded like embed_scale
  Matrix per_layer_model_projection;  // [L·P, H]
  const float* per_layer_projection_norm = nullptr;  // [P]

  const float* norm = nullptr;  // final norm [H] (§4.10)
  std::vector<LayerWeights> layers;

  // Matrices left as stored because cols % 32 != 0 although a quantized format was asked for.
  int unquantized_matrices = 0;
  size_t norm_bytes = 0;  // all f32 norm vectors and scales, read once per token

  // Storage for converted norms, widened f16 tensors and quantized matrices. Pointers above point
  // into these buffers, which is why ModelWeights moves but never copies.
  std::vector<std::vector<float>> owned_f32;
  struct FreeBytes {
    void operator()(uint8_t* p) const;
  };
  std::vector<std::unique_ptr<uint8_t, FreeBytes>> owned_bytes;  // quantized matrices

  ModelWeights() = default;
  ModelWeights(ModelWeights&&) = default;
  ModelWeights& operator=(ModelWeights&&) = default;
  ModelWeights(const ModelWeights&) = delete;
  ModelWeights& operator=(const ModelWeights&) = delete;
};

// Validates the store against the config's tensor table, then binds every tensor the forward pass
// reads. `store` must outlive the result (zero-copy views). Quantizes on all of `pool`'s threads.
Result<ModelWeights> bind_weights(const ModelConfig& cfg, const TensorStore& store,
                                  const BindOptions& opts, ThreadPool& pool);

// Bytes of weights one decode step reads: every projection, the head, one PLE row and the norms
// (for MoE only top_k of the experts).
size_t weights_decode_bytes(const ModelConfig& cfg, const ModelWeights& w);

}  // namespace infer
