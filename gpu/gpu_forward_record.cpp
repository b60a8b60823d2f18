// The recorded forward pass of one chunk (GEMMA4_TEXT.md §4-§5), mirroring model/cpu_forward.cpp
// and model/forward_*.cpp op for op. Positions and ids come from the step buffer, so the same
// recording serves every chunk of its length (decode: every token). Layers run in program order,
// so a donor's K/V are in its ring before the shared layers after it read them (§5).
#include <cmath>

#include "base/check.h"
#include "gpu/gpu_forward_impl.h"
#include "gpu/ops/matvec_add_norm.h"
#include "shaders/attention.h"

namespace infer::gpu {
namespace {

Binding whole(const Buffer& b) { return Binding{&b}; }

struct ChunkRecorder {
  const ModelConfig& cfg;
  const GpuWeights& w;
  const GpuKv& kv;
  const GpuOps& ops;
  const GpuActivations& a;
  Recorder& rec;
  uint32_t T;

  float eps() const { return float(cfg.text.rms_norm_eps); }
  uint32_t H() const { return uint32_t(cfg.text.hidden_size); }

  Result<void> matvec(const GpuMatrix& m, Binding x, Binding y, uint32_t n) const {
    return ops.matvec_for(m.format).record(rec, m, x, y, n);
  }

  // o = m · in (gelu: gelu(in) ⊙ the ple slice), then the block's residual step on the stream:
  // x = (x + rmsnorm(o) · w_post) · scale, h = rmsnorm(x) · next_w given next_w. One dispatch
  // for decode (gpu/ops/matvec_add_norm.h), else the separate ops.
  Result<void> matvec_add_norm(const GpuMatrix& m, Binding in, const GeluMulInput* gelu,
                               Binding w_post, float scale, Binding next_w) const {
    AddNormArgs an;
    an.x = whole(a.x);
    an.w_post = w_post;
    an.scale = scale;
    an.next_w = next_w;
    if (next_w.buffer != nullptr) an.h = whole(a.h);
    an.eps = eps();
    return record_matvec_add_norm(rec, ops.matvec_for(m.format), *ops.norm, *ops.elementwise, m,
                                  in, gelu, whole(a.o), an, T);
  }

  // x [T, H] = embed_tokens[ids] · √H; ple [T, L·P] (§4.2, §4.3).
  Result<void> inputs() const {
    const TextConfig& tc = cfg.text;
    const Binding step = whole(*step_buf);
    INFER_TRY_VOID(ops.embed->embed(rec, step, w.embed_tokens, embed_scale, whole(a.x), T));
    const uint32_t P = uint32_t(tc.hidden_size_per_layer_input);
    if (P == 0) return Ok{};
    const uint32_t L = uint32_t(tc.num_hidden_layers);
    INFER_TRY_VOID(matvec(w.per_layer_model_projection, whole(a.x), whole(a.ple), T));
    const float proj_scale = float(1.0 / std::sqrt(double(tc.hidden_size)));
    return ops.embed->ple_inputs(rec, whole(a.ple), proj_scale, w.per_layer_projection_norm,
                                 whole(a.ple_rows), ple_scale, whole(a.ple), T, L, P, eps());
  }

  // From h [T, H]: q normed and rotated into a.q, the layer's K/V rows into its ring (none on a
  // KV-shared layer); qs gets the shape.
  Result<void> qkv(int i, QkvShape& qs) const {
    const TextConfig& tc = cfg.text;
    const LayerPlan& plan = cfg.layers[size_t(i)];
    const GpuLayerWeights& lw = w.layers[size_t(i)];
    const KvRing& ring = kv.ring(i);
    const Binding step = whole(*step_buf), h = whole(a.h), q = whole(a.q);
    // One matvec: qkv[t] = [q | k | v] (gpu/gpu_weights.h), then one qkv_prep.
    INFER_TRY_VOID(matvec(lw.qkv_proj, h, whole(a.qkv), T));
    qs.T = T;
    qs.n_q = uint32_t(tc.num_attention_heads);
    qs.n_kv = plan.kv_shared ? 0 : ring.n_kv;  // KV-shared: the donor filled the ring
    qs.d = uint32_t(plan.head_dim);
    qs.slots = ring.slots;
    qs.eps = eps();
    qs.stride = uint32_t(lw.qkv_proj.rows);
    qs.k_offset = lw.qkv_k_offset;
    qs.v_offset = lw.qkv_v_offset;  // == k_offset on K=V layers: V is the raw k projection
    qs.mode = ring.mode;
    Binding k_cache, v_cache;  // empty on KV-shared layers: nothing written there
    if (!plan.kv_shared) {
      k_cache = whole(ring.k);
      v_cache = whole(ring.v);
    }
    INFER_TRY_VOID(ops.attention->qkv_prep(rec, step, qs, whole(a.qkv), lw.q_norm, lw.k_norm,
                                           lw.inv_freq, q, k_cache, v_cache));
    return Ok{};
  }

  // h [T, H] = rmsnorm(x) · input_layernorm on entry; x += the attention block (§4.4, §4.5);
  // h = rmsnorm(x) · pre_feedforward_layernorm on exit.
  Result<void> attention(int i) const {
    const TextConfig& tc = cfg.text;
    const LayerPlan& plan = cfg.layers[size_t(i)];
    const GpuLayerWeights& lw = w.layers[size_t(i)];
    const KvRing& ring = kv.ring(i);
    const Binding step = whole(*step_buf), q = whole(a.q);
    QkvShape qs;
    INFER_TRY_VOID(qkv(i, qs));
    AttentionDims ad;
    ad.T = T;
    ad.n_q = qs.n_q;
    ad.n_kv = ring.n_kv;
    ad.d = qs.d;
    ad.slots = ring.slots;
    ad.window = plan.type == LayerType::kSliding ? uint32_t(tc.sliding_window) : 0;
    ad.mode = ring.mode;  // a KV-shared layer rotates its donor's keys with its own RoPE
    INFER_TRY_VOID(ops.attention->attend(rec, step, ad, q, whole(ring.k), whole(ring.v),
                                         whole(a.att), lw.inv_freq));
    if (mass != nullptr && ad.mode == INFER_KV_TIERED) {
      // --evict mass: this full layer's share of each cached key's mass (the first one
      // overwrites the previous chunk's).
      INFER_TRY_VOID(mass->record(rec, step, ad, q, whole(ring.k), lw.inv_freq,
                                  i != first_mass_layer));
    }
    return matvec_add_norm(lw.o_proj, whole(a.att), nullptr, lw.post_attention_layernorm, 1.0f,
                           lw.pre_feedforward_layernorm);
  }

  // x += rmsnorm(mlp (+ experts)) and, with PLE, the PLE block; then x *= layer_scalar, and
  // h = rmsnorm(x) · next_w (the next layer's input norm, or the final norm) (§4.4, §4.8, §4.9).
  Result<void> feed_forward(int i, Binding next_w) const {
    const TextConfig& tc = cfg.text;
    const GpuLayerWeights& lw = w.layers[size_t(i)];
    const uint32_t I = uint32_t(cfg.layers[size_t(i)].mlp_intermediate);
    const Binding x = whole(a.x), h = whole(a.h), o = whole(a.o), act = whole(a.act);
    INFER_CHECK(lw.gate_proj.format == lw.up_proj.format && lw.gate_proj.rows == I,
                "layer %d: gate %s [%lld], up %s", i, weight_format_name(lw.gate_proj.format),
                (long long)lw.gate_proj.rows, weight_format_name(lw.up_proj.format));
    INFER_TRY_VOID(
        ops.gate_up_for(lw.gate_proj.format).record(rec, lw.gate_proj, lw.up_proj, h, act, T));
    const uint32_t P = uint32_t(tc.hidden_size_per_layer_input);
    // Without PLE this step ends the layer: the layer scalar and the next input norm.
    const float down_scale = P == 0 ? lw.layer_scalar : 1.0f;
    const Binding down_next = P == 0 ? next_w : Binding{};
    if (!tc.enable_moe_block) {
      INFER_TRY_VOID(matvec_add_norm(lw.down_proj, act, nullptr, lw.post_feedforward_layernorm,
                                     down_scale, down_next));
    } else {
      INFER_TRY_VOID(matvec(lw.down_proj, act, o, T));
      // The router and the experts read r = x, the stream before this block (§4.4).
      MoeDims md;
      md.T = T;
      md.H = H();
      md.E = uint32_t(tc.num_experts);
      md.k = uint32_t(tc.top_k_experts);
      md.I = uint32_t(tc.moe_intermediate_size);
      md.eps = eps();
      INFER_TRY_VOID(ops.moe->route(rec, md, x, lw.router_scale, lw.router_proj,
                                    lw.router_per_expert_scale, whole(a.moe_idx),
                                    whole(a.moe_w)));
      INFER_TRY_VOID(
          ops.norm->rms_norm(rec, x, lw.pre_feedforward_layernorm_2, whole(a.x2), T, H(), eps()));
      INFER_TRY_VOID(ops.moe->experts(rec, md, whole(a.x2), lw.expert_gate_up, lw.expert_down,
                                      whole(a.moe_idx), whole(a.moe_w), whole(a.m2)));
      INFER_TRY_VOID(ops.norm->norm_sum(rec, o, lw.post_feedforward_layernorm_1, whole(a.m2),
                                        lw.post_feedforward_layernorm_2, o, T, H(), eps()));
      INFER_TRY_VOID(ops.norm->add_norm(rec, x, o, lw.post_feedforward_layernorm, down_scale,
                                        down_next, P == 0 ? h : Binding{}, T, H(), eps()));
    }
    if (P == 0) return Ok{};
    // PLE block: x += rmsnorm(projection · (gelu(gate · x) ⊙ ple[:, i])), then the layer scalar.
    const Binding g = whole(a.g);
    INFER_TRY_VOID(matvec(lw.per_layer_input_gate, x, g, T));
    GeluMulInput ple;
    ple.b = whole(a.ple);
    ple.b_stride = uint32_t(tc.num_hidden_layers) * P;  // ple [T, L·P]: slice i
    ple.b_off = uint32_t(i) * P;
    return matvec_add_norm(lw.per_layer_projection, g, &ple, lw.post_per_layer_input_norm,
                           lw.layer_scalar, next_w);
  }

  // h holds rmsnorm(x; norm) [T, H]: logits = softcap(lm_head · h) (§4.10), as `head` asks.
  Result<void> output(Head head) const {
    if (head == Head::kNone) return Ok{};
    const TextConfig& tc = cfg.text;
    const GpuMatrix& lm = w.lm_head();
    const uint32_t V = uint32_t(tc.vocab_size);
    const uint32_t rows = head == Head::kAll ? T : 1;
    Binding in = whole(a.h);
    if (head != Head::kAll && T > 1) {
      // The last row only; a copy, since a row offset need not meet the binding alignment.
      const VkDeviceSize row = VkDeviceSize(H()) * sizeof(float);
      rec.copy(a.h, row * (T - 1), a.head_in, 0, row);
      in = whole(a.head_in);
    }
    const Buffer& logits = head == Head::kAll ? a.all_logits : a.logits;
    INFER_TRY_VOID(matvec(lm, in, whole(logits), rows));
    if (tc.final_logit_softcapping) {
      INFER_TRY_VOID(ops.elementwise->softcap(rec, whole(logits), rows * V,
                                              float(*tc.final_logit_softcapping)));
    }
    const VkDeviceSize bytes = VkDeviceSize(rows) * V * sizeof(float);
    switch (head) {
      case Head::kLast:
        rec.copy(a.logits, 0, a.logits_host, 0, bytes);
        return Ok{};
      case Head::kAll:
        rec.copy(a.all_logits, 0, a.all_logits_host, 0, bytes);
        return Ok{};
      case Head::kArgmax:
        return ops.elementwise->argmax(rec, whole(a.logits), whole(a.id_host), 1, V);
      case Head::kNone:
        break;
    }
    return Ok{};
  }

  float embed_scale = 1.0f;
  float ple_scale = 1.0f;
  const Buffer* step_buf = nullptr;  // what the shaders read the step from
  const AttentionMassOps* mass = nullptr;  // --evict mass only
  int first_mass_layer = -1;               // the first tiered layer: its mass overwrites
};

}  // namespace

Result<void> GpuForward::Impl::record(Recorder& rec, uint32_t T, Head head, Part part) {
  const ModelConfig& cfg = model->config();
  const ModelWeights& mw = model->weights();
  INFER_CHECK(T >= 1 && int64_t(T) <= max_chunk, "record: T %u (max_chunk %lld)", T,
              (long long)max_chunk);
  ChunkRecorder c{cfg, *weights, *kv, ops, a, rec, T, mw.embed_scale, mw.ple_scale};
  const int L = cfg.text.num_hidden_layers;
  INFER_TRY_VOID(rec.begin(/*reusable=*/true));
  // Quiescence splits a decode token at the skip depth d (gpu_forward_quiescence.h): the upper
  // parts go on from the stream, h and step the lower part left on the device.
  const int d = part == Part::kWhole ? L - 1 : quiet->q.skip_depth();
  const bool lower = part == Part::kWhole || part == Part::kLower;
  c.step_buf = &a.step;
  if (ring) {
    // The ring's shaders read a key slot per key: from device memory, not across the bus from
    // the host-visible step buffer (one copy of a few KB per chunk).
    if (lower) rec.copy(a.step, 0, a.step_dev, 0, a.step.size());
    c.step_buf = &a.step_dev;
  }
  c.mass = mass.get();
  for (int i = 0; i < L && c.mass != nullptr; ++i) {
    if (kv->ring(i).mode == INFER_KV_TIERED) {
      c.first_mass_layer = i;
      break;
    }
  }
  if (lower) {
    INFER_TRY_VOID(c.inputs());
    // h = rmsnorm(x) · the first layer's input norm; later ones come fused from add_norm.
    const Binding first_norm = L > 0 ? weights->layers[0].input_layernorm : weights->norm;
    INFER_TRY_VOID(ops.norm->rms_norm(rec, whole(a.x), first_norm, whole(a.h), T,
                                      uint32_t(cfg.text.hidden_size), c.eps()));
  }
  if (part == Part::kCarried) INFER_TRY_VOID(record_carried(rec));
  const int first = lower ? 0 : d + 1;
  const int last = part == Part::kLower || part == Part::kCarried ? d : L - 1;
  for (int i = first; i <= last; ++i) {
    INFER_TRY_VOID(c.attention(i));
    const Binding next_w = i + 1 < L ? weights->layers[size_t(i) + 1].input_layernorm
                                     : weights->norm;
    INFER_TRY_VOID(c.feed_forward(i, next_w));
    if (quiet) record_quiet_copies(rec, T, i);
  }
  if (part == Part::kLower) return rec.end();
  // KV ring: the chunk's rows of the tiered layers leave their staging slots for the plan's
  // write slots only now, after every layer (donors' shared layers included) attended the
  // victims they replace.
  for (int i = 0; i < L; ++i) {
    const KvRing* own = kv->own(i);
    if (own == nullptr || own->mode != INFER_KV_TIERED) continue;
    INFER_TRY_VOID(ops.attention->kv_commit(rec, whole(*c.step_buf), T, own->n_kv * own->d,
                                            own->slots, whole(own->k), whole(own->v)));
  }
  if (c.mass != nullptr) c.mass->record_readback(rec);
  INFER_TRY_VOID(c.output(head));
  return rec.end();
}

Result<void> GpuForward::Impl::record_kv_rows(Recorder& rec, int layer) {
  const ModelWeights& mw = model->weights();
  ChunkRecorder c{model->config(), *weights, *kv, ops, a, rec, 1, mw.embed_scale, mw.ple_scale};
  c.step_buf = ring ? &a.step_dev : &a.step;
  QkvShape qs;
  return c.qkv(layer, qs);
}

}  // namespace infer::gpu
