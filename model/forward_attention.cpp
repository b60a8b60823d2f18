// The attention half of a decoder layer (GEMMA4_TEXT.md §4.4-§4.7): projections, q/k/v norms,
// RoPE, KV sharing (§5) and K=V layers, then o_proj and the post-attention norm into the stream.
#include <cstring>
#include <span>

#include "base/check.h"
#include "model/forward_blocks.h"
#include "model/ops/attention.h"
#include "model/ops/attention_mass.h"
#include "model/ops/matmul.h"
#include "model/ops/rms_norm.h"
#include "model/ops/rope.h"

namespace infer {
namespace {

// The chunk's raw k (and v) projections of a layer owning KV -> its cache-ready K/V rows: v from
// k on K=V layers, k_norm, RoPE (exact mode; the ring rotates at gather), v_norm (§4.5).
void finish_kv(const ForwardContext& c, int layer) {
  const LayerPlan& plan = c.cfg.layers[size_t(layer)];
  const LayerWeights& lw = c.w.layers[size_t(layer)];
  const int64_t T = c.T, d = plan.head_dim, n_kv = plan.num_key_value_heads;
  const float eps = float(c.cfg.text.rms_norm_eps);
  const bool ring = c.kv.ring_mode();
  float* k = c.kv.chunk_k(layer);
  float* v = c.kv.chunk_v(layer);
  if (plan.k_eq_v) {
    // V is the raw k projection, taken before k_norm and RoPE (§4.5).
    std::memcpy(v, k, size_t(T * n_kv * d) * sizeof(float));
  }
  rms_norm(k, lw.k_norm, T * n_kv, d, eps, k);
  if (!ring) rope_apply(k, T, n_kv, d, c.rope.cos(layer), c.rope.sin(layer));
  rms_norm(v, nullptr, T * n_kv, d, eps, v);  // v_norm: no weight, no RoPE
  if (ring) c.kv.gather(layer, c.pos0, T, c.rope.cos(layer), c.rope.sin(layer));
}

}  // namespace

void attention_kv_only(const ForwardContext& c, int layer, const float* x_in) {
  const LayerPlan& plan = c.cfg.layers[size_t(layer)];
  const LayerWeights& lw = c.w.layers[size_t(layer)];
  INFER_CHECK(!plan.kv_shared, "layer %d owns no KV", layer);
  const TextConfig& tc = c.cfg.text;
  float* h = c.s.h.data();
  rms_norm(x_in, lw.input_layernorm, c.T, tc.hidden_size, float(tc.rms_norm_eps), h);
  const MatmulJob jobs[] = {{&lw.k_proj, h, c.kv.chunk_k(layer)},
                            {&lw.v_proj, h, c.kv.chunk_v(layer)}};
  matmul_multi(std::span<const MatmulJob>(jobs, plan.k_eq_v ? 1 : 2), c.T, c.pool);
  finish_kv(c, layer);
  if (!plan.is_donor) c.kv.commit(layer, c.pos0, c.T);
}

void attention_block(const ForwardContext& c, int layer) {
  // x: [T, H] -> x: [T, H]; q/att: [T, n_q, d], chunk K/V: [T, n_kv, d] (all f32).
  const TextConfig& tc = c.cfg.text;
  const LayerPlan& plan = c.cfg.layers[size_t(layer)];
  const LayerWeights& lw = c.w.layers[size_t(layer)];
  const int64_t T = c.T, H = tc.hidden_size, n_q = tc.num_attention_heads, d = plan.head_dim;
  const float eps = float(tc.rms_norm_eps);
  float* x = c.s.x.data();
  float* h = c.s.h.data();
  float* q = c.s.q.data();

  rms_norm(x, lw.input_layernorm, T, H, eps, h);
  if (plan.kv_shared) {
    matmul(lw.q_proj, h, T, q, c.pool);
  } else {
    // q, k and v all read h: one parallel pass over their rows (no v_proj on K=V layers).
    const MatmulJob jobs[] = {{&lw.q_proj, h, q},
                              {&lw.k_proj, h, c.kv.chunk_k(layer)},
                              {&lw.v_proj, h, c.kv.chunk_v(layer)}};
    matmul_multi(std::span<const MatmulJob>(jobs, plan.k_eq_v ? 2 : 3), T, c.pool);
  }
  // Exact mode: the tables hold the chunk's positions. Ring mode: they start at position 0 and
  // the chunk's queries sit at the cache position query_pos (the donor's, on a shared layer).
  const int src = plan.kv_source;
  const bool ring = c.kv.ring_mode();
  const int64_t qpos = c.kv.query_pos(src, c.pos0);
  const int64_t rot = ring ? qpos * (d / 2) : 0;
  rms_norm(q, lw.q_norm, T * n_q, d, eps, q);
  rope_apply(q, T, n_q, d, c.rope.cos(layer) + rot, c.rope.sin(layer) + rot);

  if (!plan.kv_shared) finish_kv(c, layer);

  // A KV-shared layer reads its donor's cache and this chunk's donor K/V (§5).
  const LayerPlan& src_plan = c.cfg.layers[size_t(src)];
  INFER_CHECK(src_plan.head_dim == plan.head_dim, "layer %d: donor %d head_dim %d != %d", layer,
              src, src_plan.head_dim, plan.head_dim);
  AttentionShape shape;
  shape.T = T;
  shape.pos0 = qpos;
  shape.n_q = n_q;
  shape.n_kv = src_plan.num_key_value_heads;
  shape.d = d;
  shape.window = plan.type == LayerType::kSliding ? tc.sliding_window : 0;
  const AttentionScratch scratch{c.s.att_partial.data(), c.s.att_partial_row, c.s.n_workers};
  float* att = c.s.att.data();
  const KvView view = c.kv.view(src, c.pos0);
  attention(q, shape, view, att, scratch, c.pool);
  if (c.key_mass != nullptr && shape.window == 0) {
    attention_key_mass(q, shape, view, qpos, c.mass_scores, c.key_mass);
  }
  if (!plan.kv_shared && !plan.is_donor) c.kv.commit(layer, c.pos0, T);

  float* o = c.s.o.data();
  matmul(lw.o_proj, att, T, o, c.pool);
  rms_norm(o, lw.post_attention_layernorm, T, H, eps, o);
  for (int64_t i = 0; i < T * H; ++i) x[i] += o[i];
}

}  // namespace infer
