// Allocation of the forward pass's scratch buffers and RoPE tables: everything a chunk needs is
// sized here, once, so prefill and decode allocate nothing.
#include <algorithm>

#include "model/forward_blocks.h"
#include "model/ops/attention.h"
#include "model/ops/rope.h"

namespace infer {

ForwardScratch::ForwardScratch(const ModelConfig& cfg, int64_t C, int64_t max_keys_in,
                               int n_workers_in)
    : max_chunk(C), max_keys(max_keys_in), n_workers(n_workers_in) {
  const TextConfig& tc = cfg.text;
  const int64_t H = tc.hidden_size, P = tc.hidden_size_per_layer_input;
  const int64_t L = tc.num_hidden_layers;
  int64_t qd = 0, inter = 0;
  for (const LayerPlan& p : cfg.layers) {
    qd = std::max<int64_t>(qd, int64_t(tc.num_attention_heads) * p.head_dim);
    inter = std::max<int64_t>(inter, p.mlp_intermediate);
  }
  for (auto* v : {&x, &h, &o, &m}) v->assign(size_t(C * H), 0.0f);
  q.assign(size_t(C * qd), 0.0f);
  att.assign(size_t(C * qd), 0.0f);
  gate.assign(size_t(C * inter), 0.0f);
  up.assign(size_t(C * inter), 0.0f);
  if (P > 0) {
    ple.assign(size_t(C * L * P), 0.0f);
    ple_row.assign(size_t(L * P), 0.0f);
    ple_gate.assign(size_t(C * P), 0.0f);
  }
  if (tc.enable_moe_block) {
    const int64_t E = tc.num_experts, I = tc.moe_intermediate_size;
    router_logits.assign(size_t(C * E), 0.0f);
    for (auto* v : {&moe_in, &moe_out, &moe_x, &moe_y}) v->assign(size_t(C * H), 0.0f);
    moe_gu.assign(size_t(C * 2 * I), 0.0f);
    moe_act.assign(size_t(C * I), 0.0f);
    expert_tokens.assign(size_t(E * C), 0);
    expert_weights.assign(size_t(E * C), 0.0f);
    expert_count.assign(size_t(E), 0);
    top_idx.assign(size_t(tc.top_k_experts), 0);
    top_w.assign(size_t(tc.top_k_experts), 0.0f);
  }
  int64_t d_max = 0;
  for (const LayerPlan& p : cfg.layers) d_max = std::max<int64_t>(d_max, p.head_dim);
  att_partial_row = attention_partial_floats(tc.num_attention_heads, d_max);
  att_partial.assign(size_t(n_workers * att_partial_row), 0.0f);
}

RopeTables::RopeTables(const ModelConfig& cfg, int64_t max_chunk) {
  for (const LayerPlan& p : cfg.layers) {
    std::vector<float> f = rope_inv_freq(cfg.rope(p.type), p.head_dim);
    auto it = std::find(inv_freq.begin(), inv_freq.end(), f);
    table_of_layer.push_back(int(it - inv_freq.begin()));
    if (it == inv_freq.end()) inv_freq.push_back(std::move(f));
  }
  for (const std::vector<float>& f : inv_freq) {
    cos_.emplace_back(size_t(max_chunk) * f.size(), 0.0f);
    sin_.emplace_back(size_t(max_chunk) * f.size(), 0.0f);
  }
}

void RopeTables::compute(int64_t pos0, int64_t T) {
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    rope_tables(inv_freq[i].data(), int64_t(inv_freq[i].size()), pos0, T, cos_[i].data(),
                sin_[i].data());
  }
}

const float* RopeTables::cos(int layer) const {
  return cos_[size_t(table_of_layer[size_t(layer)])].data();
}
const float* RopeTables::sin(int layer) const {
  return sin_[size_t(table_of_layer[size_t(layer)])].data();
}

}  // namespace infer
