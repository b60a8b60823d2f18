// Internal to the CPU forward pass: its scratch buffers and the blocks of one decoder layer
// (GEMMA4_TEXT.md §4). Each block reads and updates the stream x [T, H] of the current chunk.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/kv_cache.h"
#include "model/weights.h"

namespace infer {

class ThreadPool;

// Every buffer the forward pass writes, sized once for chunks of up to C = max_chunk tokens.
struct ForwardScratch {
  ForwardScratch(const ModelConfig& cfg, int64_t max_chunk, int64_t max_keys, int n_workers);

  int64_t max_chunk = 0;
  std::vector<float> x, h, o, m;  // [C, H]: stream, normed input, block output, MoE dense part
  std::vector<float> q, att;      // [C, n_q·d_max]
  std::vector<float> gate, up;    // [C, I_max]
  std::vector<float> ple;         // [C, L·P]: per-layer inputs (§4.3)
  std::vector<float> ple_row;     // [L·P]: one token's PLE table row
  std::vector<float> ple_gate;    // [C, P]
  // MoE (§4.9): router logits [C, E]; x2, m2, gathered rows, expert output [C, H] each;
  // gate_up [C, 2I] and activation [C, I]; per expert the routed tokens and weights [E, C].
  std::vector<float> router_logits;
  std::vector<float> moe_in, moe_out, moe_x, moe_y;
  std::vector<float> moe_gu, moe_act;
  std::vector<int32_t> expert_tokens;
  std::vector<float> expert_weights;
  std::vector<int32_t> expert_count;  // [E]
  std::vector<int32_t> top_idx;       // [k]
  std::vector<float> top_w;           // [k]
  // Attention: one token's keys split over workers, each with a partial softmax state
  // [n_workers, attention_partial_floats(n_q, d_max)]. max_keys: the most keys a query sees.
  std::vector<float> att_partial;
  int64_t att_partial_row = 0;
  int64_t max_keys = 0;
  int n_workers = 0;
};

// RoPE inverse frequencies, one table per distinct (type, head dim), and their cos/sin for the
// current chunk's positions (§4.6): computed once per chunk, shared by every layer using them.
// In ring mode positions are cache positions, bounded: compute(0, n) once covers them all.
struct RopeTables {
  RopeTables(const ModelConfig& cfg, int64_t max_chunk);
  void compute(int64_t pos0, int64_t T);
  const float* cos(int layer) const;
  const float* sin(int layer) const;

  std::vector<std::vector<float>> inv_freq;    // [tables][d/2]
  std::vector<int> table_of_layer;             // [L]
  std::vector<std::vector<float>> cos_, sin_;  // [tables][C, d/2]
};

// One chunk of T tokens at positions pos0 .. pos0+T-1.
struct ForwardContext {
  const ModelConfig& cfg;
  const ModelWeights& w;
  ThreadPool& pool;
  ForwardScratch& s;
  KvCache& kv;
  const RopeTables& rope;
  int64_t pos0 = 0;
  int64_t T = 0;
  // Ring mode with --evict mass: attention mass per attended cached key [plan.n_keys], summed
  // over full layers (attention_key_mass), and its scores scratch [n_keys + T]. Else nullptr.
  float* key_mass = nullptr;
  float* mass_scores = nullptr;
};

// ids [T] -> x [T, H] (scaled embeddings, §4.2) and, when P > 0, ple [T, L·P] (§4.3).
void embed_chunk(const ForwardContext& c, const int32_t* ids);
// x += rmsnorm(attention(rmsnorm(x)); post_attention_layernorm) (§4.4, §4.5); commits the layer's
// K/V to its cache unless it is a donor (donors commit after the layer loop, §5). In ring mode
// keys are cached before RoPE and queries rotated at their cache position (kv_cache.h).
void attention_block(const ForwardContext& c, int layer);
// Quiescence (quiescence.h): a skipped layer's K/V alone, from its carried input stream x_in
// [T, H], normed, projected, normed/rotated and committed exactly as attention_block does; x is
// untouched. Only for layers that own KV.
void attention_kv_only(const ForwardContext& c, int layer, const float* x_in);
// x += rmsnorm(mlp (+ experts); post_feedforward_layernorm) (§4.4, §4.8, §4.9).
void mlp_block(const ForwardContext& c, int layer);
// MoE routing of one token (§4.9): prob [E] (the router softmax) -> idx/w [k], the k largest (ties
// to the lower index, as a stable argsort) with weights p_j / Σp · per_expert_scale[e_j].
void moe_top_k(const float* prob, int64_t E, int64_t k, const float* per_expert_scale,
               int32_t* idx, float* w);
// The MoE branch: moe_out [T, H] = Σ_j w_j · expert_{e_j}(rmsnorm(r; pre_ff_2)) for r = x (§4.9).
void moe_experts(const ForwardContext& c, int layer);
// x += rmsnorm(per_layer_projection · (gelu(gate · x) ⊙ ple[:, i]); post_per_layer_input_norm).
void ple_block(const ForwardContext& c, int layer);

}  // namespace infer
