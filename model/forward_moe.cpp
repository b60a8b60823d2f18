// The MoE expert branch (GEMMA4_TEXT.md §4.9): fp32 router softmax over the un-normalised stream,
// top-k, renormalise × per_expert_scale; tokens are grouped per expert so each expert runs one
// matmul over the chunk's tokens routed to it.
#include <cmath>
#include <cstring>

#include "model/forward_blocks.h"
#include "model/ops/gelu.h"
#include "model/ops/matmul.h"
#include "model/ops/rms_norm.h"
#include "model/ops/softmax.h"

namespace infer {

void moe_top_k(const float* prob, int64_t E, int64_t k, const float* per_expert_scale,
               int32_t* idx, float* w) {
  double sum = 0.0;
  for (int64_t j = 0; j < k; ++j) {
    int32_t best = -1;
    for (int64_t e = 0; e < E; ++e) {
      bool taken = false;
      for (int64_t i = 0; i < j; ++i) taken |= idx[i] == e;
      if (!taken && (best < 0 || prob[e] > prob[best])) best = int32_t(e);
    }
    idx[j] = best;
    sum += prob[best];
  }
  for (int64_t j = 0; j < k; ++j) w[j] = float(prob[idx[j]] / sum) * per_expert_scale[idx[j]];
}

void moe_experts(const ForwardContext& c, int layer) {
  // x: [T, H] (r, the stream before the FFN) -> moe_out: [T, H]. Router [E, H]; expert e:
  // gate_up [2I, H], down [H, I].
  const TextConfig& tc = c.cfg.text;
  const LayerWeights& lw = c.w.layers[size_t(layer)];
  const int64_t T = c.T, H = tc.hidden_size, E = tc.num_experts, k = tc.top_k_experts;
  const int64_t I = tc.moe_intermediate_size;
  const float eps = float(tc.rms_norm_eps);
  const int64_t C = c.s.max_chunk;
  const float* x = c.s.x.data();
  float* xn = c.s.moe_in.data();
  float* logits = c.s.router_logits.data();
  int32_t* tokens = c.s.expert_tokens.data();
  float* weights = c.s.expert_weights.data();
  int32_t* count = c.s.expert_count.data();

  // Router: rmsnorm(r) ⊙ router.scale · H^(-1/2), then proj, softmax, top-k.
  const float inv_sqrt_h = float(1.0 / std::sqrt(double(H)));
  rms_norm(x, nullptr, T, H, eps, xn);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < H; ++j) xn[t * H + j] = xn[t * H + j] * lw.router_scale[j] * inv_sqrt_h;
  }
  matmul(lw.router_proj, xn, T, logits, c.pool);
  for (int64_t e = 0; e < E; ++e) count[e] = 0;
  int32_t* idx = c.s.top_idx.data();
  float* w = c.s.top_w.data();
  for (int64_t t = 0; t < T; ++t) {
    softmax(logits + t * E, E);
    moe_top_k(logits + t * E, E, k, lw.router_per_expert_scale, idx, w);
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = idx[j];
      tokens[e * C + count[e]] = int32_t(t);
      weights[e * C + count[e]] = w[j];
      ++count[e];
    }
  }

  // Experts over x2 = rmsnorm(r; pre_feedforward_layernorm_2).
  rms_norm(x, lw.pre_feedforward_layernorm_2, T, H, eps, xn);
  float* out = c.s.moe_out.data();
  std::memset(out, 0, size_t(T * H) * sizeof(float));
  float* gx = c.s.moe_x.data();
  float* gu = c.s.moe_gu.data();
  float* act = c.s.moe_act.data();
  float* y = c.s.moe_y.data();
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = count[e];
    if (n == 0) continue;
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(gx + i * H, xn + int64_t(tokens[e * C + i]) * H, size_t(H) * sizeof(float));
    }
    matmul(lw.expert_gate_up[size_t(e)], gx, n, gu, c.pool);
    // Rows [0, I) of gate_up are the gate, [I, 2I) the up projection.
    for (int64_t i = 0; i < n; ++i) gelu_mul(gu + i * 2 * I, gu + i * 2 * I + I, I, act + i * I);
    matmul(lw.expert_down[size_t(e)], act, n, y, c.pool);
    for (int64_t i = 0; i < n; ++i) {
      float* orow = out + int64_t(tokens[e * C + i]) * H;
      const float wt = weights[e * C + i];
      for (int64_t j = 0; j < H; ++j) orow[j] += wt * y[i * H + j];
    }
  }
}

}  // namespace infer
