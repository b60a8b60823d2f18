// The feed-forward half of a decoder layer (GEMMA4_TEXT.md §4.4, §4.8): the dense gated-GELU MLP,
// plus the expert branch on MoE models, wrapped by post_feedforward_layernorm into the stream.
#include "model/forward_blocks.h"
#include "model/ops/gelu.h"
#include "model/ops/matmul.h"
#include "model/ops/matmul_kernels.h"
#include "model/ops/rms_norm.h"
#include "model/thread_pool.h"

namespace infer {

void mlp_block(const ForwardContext& c, int layer) {
  // x: [T, H] -> x: [T, H]; gate/up: [T, I] f32, I = the layer's MLP width (doubled if wide).
  const TextConfig& tc = c.cfg.text;
  const LayerWeights& lw = c.w.layers[size_t(layer)];
  const int64_t T = c.T, H = tc.hidden_size, I = c.cfg.layers[size_t(layer)].mlp_intermediate;
  const float eps = float(tc.rms_norm_eps);
  float* x = c.s.x.data();
  float* h = c.s.h.data();
  float* gate = c.s.gate.data();
  float* up = c.s.up.data();
  float* o = c.s.o.data();

  rms_norm(x, lw.pre_feedforward_layernorm, T, H, eps, h);
  // gate = gelu(gate_proj · h) ⊙ (up_proj · h) in one parallel pass: each thread computes the
  // same rows of both projections, then their product, while they are in its cache.
  c.pool.parallel_for(
      I,
      [&](int64_t r0, int64_t r1) {
        matmul_rows(lw.gate_proj, h, T, gate, r0, r1);
        matmul_rows(lw.up_proj, h, T, up, r0, r1);
        for (int64_t t = 0; t < T; ++t) {
          gelu_mul(gate + t * I + r0, up + t * I + r0, r1 - r0, gate + t * I + r0);
        }
      },
      kMatmulRowAlign);
  matmul(lw.down_proj, gate, T, o, c.pool);

  if (tc.enable_moe_block) {
    // m = rmsnorm(m; post_ff_1) + rmsnorm(experts; post_ff_2); the router reads x itself (§4.4).
    rms_norm(o, lw.post_feedforward_layernorm_1, T, H, eps, o);
    moe_experts(c, layer);
    float* m2 = c.s.moe_out.data();
    rms_norm(m2, lw.post_feedforward_layernorm_2, T, H, eps, m2);
    for (int64_t i = 0; i < T * H; ++i) o[i] += m2[i];
  }
  // The post-FFN norm wraps the sum of both branches (§4.4).
  rms_norm(o, lw.post_feedforward_layernorm, T, H, eps, o);
  for (int64_t i = 0; i < T * H; ++i) x[i] += o[i];
}

}  // namespace infer
