// Token embedding (GEMMA4_TEXT.md §4.2) and per-layer embeddings (§4.3): the per-chunk inputs and
// the PLE block each layer ends with (§4.4).
#include <cmath>

#include "model/forward_blocks.h"
#include "model/ops/gelu.h"
#include "model/ops/matmul.h"
#include "model/ops/matmul_kernels.h"
#include "model/ops/rms_norm.h"
#include "model/thread_pool.h"

namespace infer {

void embed_chunk(const ForwardContext& c, const int32_t* ids) {
  // ids: [T] -> x: [T, H] f32 = embed_tokens[id] · √H; ple: [T, L, P] f32.
  const TextConfig& tc = c.cfg.text;
  const int64_t T = c.T, H = tc.hidden_size, P = tc.hidden_size_per_layer_input;
  const int64_t L = tc.num_hidden_layers;
  const float eps = float(tc.rms_norm_eps);
  float* x = c.s.x.data();
  for (int64_t t = 0; t < T; ++t) {
    float* xr = x + t * H;
    dequantize_row(c.w.embed_tokens, ids[t], xr);
    for (int64_t j = 0; j < H; ++j) xr[j] *= c.w.embed_scale;
  }
  if (P == 0) return;

  // Context part: (per_layer_model_projection · h0) · H^(-1/2), RMSNorm per [P] slice (§4.3.2-3).
  const int64_t LP = L * P;
  float* ple = c.s.ple.data();
  matmul(c.w.per_layer_model_projection, x, T, ple, c.pool);
  const float proj_scale = float(1.0 / std::sqrt(double(H)));
  for (int64_t i = 0; i < T * LP; ++i) ple[i] *= proj_scale;
  rms_norm(ple, c.w.per_layer_projection_norm, T * L, P, eps, ple);

  // Token part and combine: (proj + table[id] · √P) · 2^(-1/2) (§4.3.1, §4.3.4).
  const float combine = float(1.0 / std::sqrt(2.0));
  float* tok = c.s.ple_row.data();
  for (int64_t t = 0; t < T; ++t) {
    dequantize_row(c.w.embed_tokens_per_layer, ids[t], tok);
    float* pr = ple + t * LP;
    for (int64_t j = 0; j < LP; ++j) pr[j] = (pr[j] + tok[j] * c.w.ple_scale) * combine;
  }
}

void ple_block(const ForwardContext& c, int layer) {
  // x: [T, H], ple: [T, L, P] -> x: [T, H]. gate [P, H], projection [H, P] (§4.4).
  const TextConfig& tc = c.cfg.text;
  const LayerWeights& lw = c.w.layers[size_t(layer)];
  const int64_t T = c.T, H = tc.hidden_size, P = tc.hidden_size_per_layer_input;
  const int64_t LP = int64_t(tc.num_hidden_layers) * P;
  float* x = c.s.x.data();
  float* g = c.s.ple_gate.data();
  float* o = c.s.o.data();
  // g = gelu(gate · x) ⊙ ple[:, layer], each thread on its own rows of the gate.
  c.pool.parallel_for(
      P,
      [&](int64_t r0, int64_t r1) {
        matmul_rows(lw.per_layer_input_gate, x, T, g, r0, r1);
        for (int64_t t = 0; t < T; ++t) {
          const float* pr = c.s.ple.data() + t * LP + int64_t(layer) * P;
          for (int64_t j = r0; j < r1; ++j) g[t * P + j] = gelu_tanh(g[t * P + j]) * pr[j];
        }
      },
      kMatmulRowAlign);
  matmul(lw.per_layer_projection, g, T, o, c.pool);
  rms_norm(o, lw.post_per_layer_input_norm, T, H, float(tc.rms_norm_eps), o);
  for (int64_t i = 0; i < T * H; ++i) x[i] += o[i];
}

}  // namespace infer
