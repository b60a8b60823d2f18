// The recorded forward pass of one chunk (GEMMA4_TEXT.md §4-§5), mirroring model/cpu_forward.cpp
// and model/forward_*.cpp op for op. Positions and ids come from the step buffer, so the same
// recording serves every chunk of its length (decode: every token). Layers run in program order,
// so a donor's K/V are in its ring before the shared layers after it read them (§5).
//
// A block's residual step is left pending until the next product reads the stream: add_norm then
// applies it in place just before the product, with the product's input norm fused in.
#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "gpu/gpu_forward_impl.h"
#include "shaders/attention.h"

namespace infer::gpu {
namespace {

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
    return ops.matvec_for(m).record(rec, m, x, y, n);
  }

  // The stream [T, H] between blocks.
  struct Stream {
    int cur = 0;           // it is in x_buf(cur), before any pending step
    bool pending = false;  // it is (x_buf(cur) + rmsnorm(a.o) · w_post) · scale
    Binding w_post;
    float scale = 1.0f;
    bool h_ready = false;  // a.h holds the next product's normed input already (record_kv_rows)
  };

  const Buffer& x_buf(int k) const { return k == 0 ? a.x : a.x_alt; }

  // The block that wrote a.o ends with x = (x + rmsnorm(o) · w_post) · scale (§4.4), left to the
  // next reader of the stream.
  void end_block(Binding w_post, float scale) {
    INFER_CHECK(!s.pending, "a residual step is pending already");
    s.pending = true;
    s.w_post = w_post;
    s.scale = scale;
  }

  // The step layer i ends with: the PLE block's, else the MLP's (its layer scalar either way).
  void end_layer_step(int i, Binding* w_post, float* scale) const {
    const GpuLayerWeights& lw = w.layers[size_t(i)];
    *w_post = cfg.text.hidden_size_per_layer_input > 0 ? lw.post_per_layer_input_norm
                                                       : lw.post_feedforward_layernorm;
    *scale = lw.layer_scalar;
  }

  // Layer i's last block (the PLE block's, else the MLP's) ends: its step left pending.
  void end_layer(int i) {
    Binding w_post;
    float scale = 1.0f;
    end_layer_step(i, &w_post, &scale);
    end_block(w_post, scale);
  }

  // The pending step (and norm_w's norm into a.h, given) as separate dispatches, in place; what
  // the product then reads: a.h given norm_w, else the stream. With want_int8_x (the product takes
  // int8 x) add_norm also quantizes a.h into a.h_int8 where it can, and *x_int8 says so.
  Result<Binding> apply_pending_step(Binding norm_w, bool want_int8_x = false,
                                     Binding* x_int8 = nullptr) {
    const Binding x = whole(x_buf(s.cur));
    const bool norm = norm_w.buffer != nullptr;
    if (s.pending) {
      const bool h_int8 = want_int8_x && norm && ops.norm->writes_int8_h(H());
      INFER_TRY_VOID(ops.norm->add_norm(rec, x, whole(a.o), s.w_post, s.scale, norm_w,
                                        norm ? whole(a.h) : Binding{}, T, H(), eps(),
                                        h_int8 ? whole(a.h_int8) : Binding{}));
      if (h_int8) *x_int8 = whole(a.h_int8);
      s.pending = false;
    } else if (norm && !s.h_ready) {
      INFER_TRY_VOID(ops.norm->rms_norm(rec, x, norm_w, whole(a.h), T, H(), eps()));
    }
    s.h_ready = false;
    return norm ? whole(a.h) : x;
  }

  // y = m · in, in = rmsnorm(stream) · norm_w (given) or the stream; gate-up with `up`.
  Result<void> product(const GpuMatrix& m, const GpuMatrix* up, Binding norm_w, Binding y) {
    const bool want_int8_x =
        ops.int8_from_norm &&
        (up != nullptr ? ops.gate_up_for(m.format).takes_int8_x(m.rows, m.cols, T)
                       : ops.matvec_for(m).takes_int8_x(m.rows, m.cols, T));
    Binding x_int8;
    INFER_TRY(const Binding in, apply_pending_step(norm_w, want_int8_x, &x_int8));
    if (up != nullptr) return ops.gate_up_for(m.format).record(rec, m, *up, in, y, T, x_int8);
    return ops.matvec_for(m).record(rec, m, in, y, T, x_int8);
  }

  // Quiescence copies the stream after a layer from a.x (gpu_forward_quiescence.cpp): made there
  // by add_norm from a copy, the pending step left to the next product, so that recordings split
  // at a layer compute what the whole one does. The stream before the step moves to x_alt.
  Result<void> expose_stream() {
    INFER_CHECK(s.pending, "no residual step pending after a layer");
    const VkDeviceSize bytes = VkDeviceSize(T) * H() * sizeof(float);
    if (s.cur == 1) {
      rec.copy(a.x_alt, 0, a.x, 0, bytes);  // the stream is in x_alt already
    } else {
      rec.copy(a.x, 0, a.x_alt, 0, bytes);
    }
    s.cur = 1;
    return ops.norm->add_norm(rec, whole(a.x), whole(a.o), s.w_post, s.scale, Binding{}, Binding{},
                              T, H(), eps());
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

  // From the stream's input norm, one matvec: a.qkv[t] = [q | k | v] (gpu/gpu_weights.h), raw;
  // qs gets its shape.
  Result<void> qkv_projection(int i, QkvShape& qs) {
    const TextConfig& tc = cfg.text;
    const LayerPlan& plan = cfg.layers[size_t(i)];
    const GpuLayerWeights& lw = w.layers[size_t(i)];
    const KvRing& ring = kv.ring(i);
    INFER_TRY_VOID(product(lw.qkv_proj, nullptr, lw.input_layernorm, whole(a.qkv)));
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
    return Ok{};
  }

  // The projection, then q normed and rotated into a.q, the layer's K/V rows into its ring
  // (none on a KV-shared layer: empty bindings); qs gets the shape.
  Result<void> qkv(int i, QkvShape& qs) {
    const GpuLayerWeights& lw = w.layers[size_t(i)];
    const KvRing& ring = kv.ring(i);
    INFER_TRY_VOID(qkv_projection(i, qs));
    const bool own = qs.n_kv > 0;
    return ops.attention->qkv_prep(rec, whole(*step_buf), qs, whole(a.qkv), lw.q_norm, lw.k_norm,
                                   lw.inv_freq, whole(a.q), own ? whole(ring.k) : Binding{},
                                   own ? whole(ring.v) : Binding{});
  }

  // x += the attention block (§4.4, §4.5), its residual step left pending.
  Result<void> attention(int i) {
    const TextConfig& tc = cfg.text;
    const LayerPlan& plan = cfg.layers[size_t(i)];
    const GpuLayerWeights& lw = w.layers[size_t(i)];
    const KvRing& ring = kv.ring(i);
    const Binding step = whole(*step_buf), q = whole(a.q);
    QkvShape qs;
    INFER_TRY_VOID(qkv_projection(i, qs));
    AttentionDims ad;
    ad.T = T;
    ad.n_q = qs.n_q;
    ad.n_kv = ring.n_kv;
    ad.d = qs.d;
    ad.slots = ring.slots;
    ad.window = plan.type == LayerType::kSliding ? uint32_t(tc.sliding_window) : 0;
    ad.mode = ring.mode;  // a KV-shared layer rotates its donor's keys with its own RoPE
    // qkv_prep and attention, one dispatch where the op can (AttentionOps::prep_attend), its
    // output also quantized for the o projection where both take that.
    const MatvecOp& o_op = ops.matvec_for(lw.o_proj);
    const bool att_int8 = ops.int8_from_attention && ops.attention->writes_int8_out(ad) &&
                          o_op.takes_int8_x(lw.o_proj.rows, lw.o_proj.cols, T);
    const Binding x_int8 = att_int8 ? whole(a.att_int8) : Binding{};
    INFER_TRY_VOID(ops.attention->prep_attend(rec, step, qs, ad, whole(a.qkv), lw.q_norm,
                                              lw.k_norm, lw.inv_freq, q, whole(ring.k),
                                              whole(ring.v), whole(a.att), x_int8));
    if (mass != nullptr && ad.mode == INFER_KV_TIERED) {
      // --evict mass: this full layer's share of each cached key's mass (the first one
      // overwrites the previous chunk's).
      INFER_TRY_VOID(mass->record(rec, step, ad, q, whole(ring.k), lw.inv_freq,
                                  i != first_mass_layer));
    }
    INFER_TRY_VOID(o_op.record(rec, lw.o_proj, whole(a.att), whole(a.o), T, x_int8));
    end_block(lw.post_attention_layernorm, 1.0f);
    return Ok{};
  }

  // x += rmsnorm(mlp (+ experts)) and, with PLE, the PLE block; then x *= layer_scalar, that
  // last residual step left pending (§4.4, §4.8, §4.9).
  Result<void> feed_forward(int i) {
    const TextConfig& tc = cfg.text;
    const GpuLayerWeights& lw = w.layers[size_t(i)];
    const uint32_t I = uint32_t(cfg.layers[size_t(i)].mlp_intermediate);
    const Binding o = whole(a.o), act = whole(a.act);
    INFER_CHECK(lw.gate_proj.format == lw.up_proj.format && lw.gate_proj.rows == I,
                "layer %d: gate %s [%lld], up %s", i, weight_format_name(lw.gate_proj.format),
                (long long)lw.gate_proj.rows, weight_format_name(lw.up_proj.format));
    INFER_TRY_VOID(product(lw.gate_proj, &lw.up_proj, lw.pre_feedforward_layernorm, act));
    const uint32_t P = uint32_t(tc.hidden_size_per_layer_input);
    INFER_TRY_VOID(matvec(lw.down_proj, act, o, T));
    if (tc.enable_moe_block) {
      // The router and the experts read r = x, the stream before this block (§4.4): the
      // gate-up product above left it in place, no step pending.
      const Binding x = whole(x_buf(s.cur));
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
    }
    if (P == 0) {  // this step ends the layer
      end_layer(i);
      return Ok{};
    }
    end_block(lw.post_feedforward_layernorm, 1.0f);
    // PLE block: x += rmsnorm(projection · (gelu(gate · x) ⊙ ple[:, i])), then the layer scalar.
    const Binding g = whole(a.g);
    const uint32_t off = uint32_t(i) * P;  // ple [T, L·P]: slice i
    INFER_TRY_VOID(product(lw.per_layer_input_gate, nullptr, Binding{}, g));
    INFER_TRY_VOID(ops.elementwise->gelu_mul(rec, g, P, 0, whole(a.ple),
                                             uint32_t(tc.num_hidden_layers) * P, off, g, T, P));
    INFER_TRY_VOID(matvec(lw.per_layer_projection, g, o, T));
    end_layer(i);
    return Ok{};
  }

  // logits = softcap(lm_head · rmsnorm(x; norm)) (§4.10), as `head` asks.
  Result<void> output(Head head) {
    if (head == Head::kNone) return Ok{};
    const TextConfig& tc = cfg.text;
    const GpuMatrix& lm = w.lm_head();
    const uint32_t V = uint32_t(tc.vocab_size);
    const uint32_t rows = head == Head::kAll ? T : 1;
    const Buffer& logits = head == Head::kAll ? a.all_logits : a.logits;
    if (head != Head::kAll && T > 1) {
      // The last row only; a copy, since a row offset need not meet the binding alignment.
      INFER_TRY_VOID(apply_pending_step(w.norm));
      const VkDeviceSize row = VkDeviceSize(H()) * sizeof(float);
      rec.copy(a.h, row * (T - 1), a.head_in, 0, row);
      INFER_TRY_VOID(matvec(lm, whole(a.head_in), whole(logits), rows));
    } else {
      INFER_TRY_VOID(product(lm, nullptr, w.norm, whole(logits)));
    }
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
  Stream s;
};

}  // namespace

bool GpuForward::Impl::quiet_copies_after(int layer) const {
  const GpuQuiet& g = *quiet;
  return g.snap_layer[size_t(layer)] ||
         std::find(g.probe_layers.begin(), g.probe_layers.end(), layer) != g.probe_layers.end();
}

Result<void> GpuForward::Impl::record(Recorder& rec, uint32_t T, Head head, Part part) {
  const ModelConfig& cfg = model->config();
  const ModelWeights& mw = model->weights();
  INFER_CHECK(T >= 1 && int64_t(T) <= max_chunk, "record: T %u (max_chunk %lld)", T,
              (long long)max_chunk);
  ChunkRecorder c{cfg, *weights, *kv, ops, a, rec, T, mw.embed_scale, mw.ple_scale};
  const int L = cfg.text.num_hidden_layers;
  INFER_TRY_VOID(rec.begin(/*reusable=*/true));
  // Quiescence splits a decode token at the skip depth d (gpu_forward_quiescence.h): the upper
  // parts go on from the stream, its pending step and the step buffer the lower part left on the
  // device.
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
  if (lower) INFER_TRY_VOID(c.inputs());  // the stream in a.x, nothing pending
  if (part == Part::kCarried) {
    // The host's carried stream in a.x and its final norm in a.h; no layer runs.
    INFER_TRY_VOID(record_carried(rec));
    c.s.h_ready = true;
  }
  if (part == Part::kUpper) {
    // As the lower part left it: layer d's last step pending on x_alt (c.expose_stream(); d is
    // the deepest probe).
    c.s.cur = 1;
    c.s.pending = true;
    c.end_layer_step(d, &c.s.w_post, &c.s.scale);
  }
  const int first = lower ? 0 : d + 1;
  const int last = part == Part::kLower || part == Part::kCarried ? d : L - 1;
  for (int i = first; i <= last; ++i) {
    INFER_TRY_VOID(c.attention(i));
    INFER_TRY_VOID(c.feed_forward(i));
    if (quiet && quiet_copies_after(i)) {
      INFER_TRY_VOID(c.expose_stream());
      record_quiet_copies(rec, T, i);
    }
  }
  if (part == Part::kLower) return rec.end();
  // KV ring: the chunk's rows of the tiered layers leave their staging slots for the plan's
  // write slots only now, after every layer (donors' shared layers included) attended the
  // victims they replace. With an eviction sink the victims' rows go to the host staging first
  // (the step's E of them; none without a sink), read after this chunk's wait.
  const bool stage = evict_staging.handle() != VK_NULL_HANDLE;
  for (int i = 0, j = 0; i < L; ++i) {
    const KvRing* own = kv->own(i);
    if (own == nullptr || own->mode != INFER_KV_TIERED) continue;
    const uint32_t row = own->n_kv * own->d;
    if (stage) {
      INFER_TRY_VOID(ops.attention->kv_evict_copy(
          rec, whole(*c.step_buf), T, row, own->slots, whole(own->k), whole(own->v),
          whole(evict_staging), uint32_t(evict_k_off[size_t(j)]),
          uint32_t(evict_v_off[size_t(j)])));
    }
    ++j;
    INFER_TRY_VOID(ops.attention->kv_commit(rec, whole(*c.step_buf), T, row, own->slots,
                                            whole(own->k), whole(own->v)));
  }
  if (c.mass != nullptr) c.mass->record_readback(rec);
  INFER_TRY_VOID(c.output(head));
  return rec.end();
}

Result<void> GpuForward::Impl::record_kv_rows(Recorder& rec, int layer) {
  const ModelWeights& mw = model->weights();
  ChunkRecorder c{model->config(), *weights, *kv, ops, a, rec, 1, mw.embed_scale, mw.ple_scale};
  c.step_buf = ring ? &a.step_dev : &a.step;
  c.s.h_ready = true;  // the caller's rmsnorm(x) · input_layernorm
  QkvShape qs;
  return c.qkv(layer, qs);
}

}  // namespace infer::gpu
