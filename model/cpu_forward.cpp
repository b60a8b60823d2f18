// CpuForward: the layer loop over one chunk (GEMMA4_TEXT.md §4.4), the output head (§4.10), and
// prefill/decode on top of it. Buffers come from the constructor; the hot path allocates nothing.
#include "model/cpu_forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "base/check.h"
#include "model/forward_blocks.h"
#include "model/kv_cache.h"
#include "model/kv_ring.h"
#include "model/ops/attention.h"
#include "model/ops/gelu.h"
#include "model/ops/matmul.h"
#include "model/ops/matmul_kernels.h"
#include "model/ops/rms_norm.h"
#include "model/quiescence.h"
#include "model/thread_pool.h"

namespace infer {

struct CpuForward::Impl {
  // Exact mode when ring_cfg is null.
  Impl(const Model& model, ThreadPool& pool, int64_t max_positions, int64_t max_chunk,
       const RingConfig* ring_cfg)
      : cfg(model.config()),
        w(model.weights()),
        pool(pool),
        max_positions(max_positions),
        ring(ring_cfg ? std::make_unique<KvRing>(*ring_cfg) : nullptr),
        max_chunk(ring ? std::min(max_chunk, ring->max_chunk()) : max_chunk),
        kv(ring ? KvCache(cfg, *ring, this->max_chunk) : KvCache(cfg, max_positions, max_chunk)),
        s(cfg, this->max_chunk, max_keys(), pool.size()),
        rope(cfg, ring ? rope_positions() : this->max_chunk),
        final_row(size_t(cfg.text.hidden_size)) {
    if (ring) {
      rope.compute(0, rope_positions());  // cache positions are bounded: one table for ever
      if (ring->config().evict == EvictPolicy::kMass) {
        key_mass.assign(size_t(ring->capacity()), 0.0f);
        mass_scores.assign(size_t(ring->capacity() + this->max_chunk), 0.0f);
      }
    }
  }

  // Ring mode: the largest cache position + 1 a query or key can get (full layers: every slot
  // then the chunk; sliding ones: their window then the chunk).
  int64_t rope_positions() const {
    return std::max<int64_t>(ring->capacity(), cfg.text.sliding_window) + max_chunk;
  }
  int64_t max_keys() const {
    if (ring) return rope_positions();
    int64_t n = 1;
    for (const LayerPlan& p : cfg.layers) {
      const int64_t window = p.type == LayerType::kSliding ? cfg.text.sliding_window : 0;
      n = std::max(n, attention_max_keys(window, max_positions));
    }
    return n;
  }

  // ids [T] at positions pos.. -> logits [T, V] when all_rows, else [V] of the last row when
  // want_last (intermediate chunks of a prefill skip the head).
  void forward_chunk(const int32_t* ids, int64_t T, float* logits, bool all_rows, bool want_last);
  void head(const float* x_rows, int64_t T, float* logits);
  // Quiescence, after layer i: probes, the skip decision and the snapshots of a full token.
  // Returns true when this token skips the layers after i (x then already carries them).
  bool quiescence_after(const ForwardContext& c, int i);

  const ModelConfig& cfg;
  const ModelWeights& w;
  ThreadPool& pool;
  int64_t max_positions;  // exact mode only
  std::unique_ptr<KvRing> ring;
  int64_t max_chunk;
  KvCache kv;
  ForwardScratch s;
  RopeTables rope;
  std::vector<float> final_row;  // [H]
  std::vector<float> key_mass, mass_scores;  // ring with --evict mass: [capacity], [capacity + C]
  int64_t pos = 0;
  LayerHook hook = nullptr;
  void* hook_ctx = nullptr;
  EvictionSink* sink = nullptr;
  std::unique_ptr<Quiescence> quiet;  // null: off
};

bool CpuForward::Impl::quiescence_after(const ForwardContext& c, int i) {
  Quiescence& q = *quiet;
  const int64_t T = c.T, H = cfg.text.hidden_size, L = cfg.text.num_hidden_layers;
  const int d = q.skip_depth();
  float* x = s.x.data();
  if (q.is_probe(i)) q.observe(i, x, T);
  if (i == d && q.decide(T, T == 1)) {
    // Skip (T == 1). Layer j > d gets the carried input x + (snap[j-1] - snap[d]); only its K/V
    // are computed, so later tokens still attend to this position. x gets the whole carried
    // upper contribution snap[L-1] - snap[d].
    const float* base = q.snapshot(d);
    float* x_in = s.o.data();
    for (int j = d + 1; j < L; ++j) {
      if (cfg.layers[size_t(j)].kv_shared) continue;
      const float* before = q.snapshot(j - 1);
      for (int64_t k = 0; k < H; ++k) x_in[k] = x[k] + (before[k] - base[k]);
      attention_kv_only(c, j, x_in);
    }
    const float* top = q.snapshot(int(L - 1));
    for (int64_t k = 0; k < H; ++k) x[k] += top[k] - base[k];
    q.stats().skipped_tokens += 1;
    q.stats().skipped_layers += L - 1 - d;
    q.stats().last_skipped = true;
    return true;
  }
  if (i >= d) std::memcpy(q.snapshot(i), x + (T - 1) * H, size_t(H) * sizeof(float));
  if (i == L - 1) {
    q.mark_full();
    q.stats().last_skipped = false;
  }
  return false;
}

void CpuForward::Impl::head(const float* x_rows, int64_t T, float* logits) {
  // x_rows: [T, H] -> logits: [T, V] = softcap(lm_head · rmsnorm(x; norm)) (§4.10).
  const TextConfig& tc = cfg.text;
  const int64_t H = tc.hidden_size, V = tc.vocab_size;
  float* xn = T == 1 ? final_row.data() : s.h.data();
  rms_norm(x_rows, w.norm, T, H, float(tc.rms_norm_eps), xn);
  // Each thread softcaps the logits it has just computed: V (262144 on E2B) tanh calls left to one
  // thread after the head would serialise a few ms of every decode step.
  const bool capped = tc.final_logit_softcapping.has_value();
  const float cap = capped ? float(*tc.final_logit_softcapping) : 0.0f;
  pool.parallel_for(
      V,
      [&](int64_t r0, int64_t r1) {
        matmul_rows(w.lm_head, xn, T, logits, r0, r1);
        if (!capped) return;
        for (int64_t t = 0; t < T; ++t) softcap(logits + t * V + r0, r1 - r0, cap);
      },
      kMatmulRowAlign);
}

void CpuForward::Impl::forward_chunk(const int32_t* ids, int64_t T, float* logits, bool all_rows,
                                     bool want_last) {
  const TextConfig& tc = cfg.text;
  const int64_t H = tc.hidden_size;
  float* mass = nullptr;
  if (ring) {
    // Slots, victims and cache positions once per chunk; the victims' rows are still stored
    // while the sink reads them (layers overwrite them only at commit).
    const RingPlan& plan = ring->plan(pos, ids, T);
    if (sink != nullptr && !plan.evicted.empty()) sink->on_evict(plan.evicted, kv);
    if (!key_mass.empty()) {
      mass = key_mass.data();
      std::fill_n(mass, plan.n_keys, 0.0f);
    }
  } else {
    rope.compute(pos, T);
  }
  const ForwardContext c{cfg, w, pool, s, kv, rope, pos, T, mass, mass_scores.data()};
  embed_chunk(c, ids);
  float* x = s.x.data();
  if (hook != nullptr) hook(hook_ctx, -1, pos, T, x);
  for (int i = 0; i < tc.num_hidden_layers; ++i) {
    attention_block(c, i);
    mlp_block(c, i);
    if (tc.hidden_size_per_layer_input > 0) ple_block(c, i);
    const float scalar = w.layers[size_t(i)].layer_scalar;  // the whole stream, after PLE (§4.4)
    for (int64_t j = 0; j < T * H; ++j) x[j] *= scalar;
    if (hook != nullptr) hook(hook_ctx, i, pos, T, x);
    if (quiet && quiescence_after(c, i)) break;
  }
  if (quiet && T == 1) quiet->stats().tokens += 1;
  // Donors' K/V were read by their shared layers above; only now may they enter the ring (§5).
  for (int i = 0; i < tc.num_hidden_layers; ++i) {
    if (cfg.layers[size_t(i)].is_donor) kv.commit(i, pos, T);
  }
  if (ring) {
    if (mass != nullptr) ring->add_mass(mass);
    ring->commit();
  }
  if (all_rows) {
    head(x, T, logits);
  } else if (want_last) {
    head(x + (T - 1) * H, 1, logits);
  }
  pos += T;
}

CpuForward::CpuForward(const Model& model, ThreadPool& pool, int64_t max_positions,
                       int64_t max_chunk)
    : impl_(nullptr) {
  INFER_CHECK(max_positions > 0 && max_chunk > 0, "max_positions %lld, max_chunk %lld",
              (long long)max_positions, (long long)max_chunk);
  impl_ = new Impl(model, pool, max_positions, std::min(max_chunk, max_positions), nullptr);
}

CpuForward::CpuForward(const Model& model, ThreadPool& pool, const RingConfig& ring,
                       int64_t max_chunk)
    : impl_(nullptr) {
  INFER_CHECK(validate(ring).ok() && max_chunk > 0, "bad ring config or max_chunk %lld",
              (long long)max_chunk);
  impl_ = new Impl(model, pool, 0, max_chunk, &ring);
}

CpuForward::~CpuForward() { delete impl_; }

Result<void> CpuForward::prefill(std::span<const int32_t> ids, float* logits, bool all_logits) {
  Impl& m = *impl_;
  const int64_t n = int64_t(ids.size());
  if (n == 0) return make_error(ErrorCode::kInvalidArgument, "prefill: no tokens");
  if (!m.ring && m.pos + n > m.max_positions) {
    return make_error(ErrorCode::kInvalidArgument,
                      "prefill: " + std::to_string(n) + " tokens at position " +
                          std::to_string(m.pos) + " exceed max_positions " +
                          std::to_string(m.max_positions));
  }
  const TextConfig& tc = m.cfg.text;
  const int64_t ple_vocab =
      tc.hidden_size_per_layer_input > 0 ? tc.vocab_size_per_layer_input : tc.vocab_size;
  const int64_t vocab = std::min(tc.vocab_size, ple_vocab);
  for (int64_t i = 0; i < n; ++i) {
    if (ids[size_t(i)] < 0 || ids[size_t(i)] >= vocab) {
      return make_error(ErrorCode::kInvalidArgument, "token id " + std::to_string(ids[size_t(i)]) +
                                                         " at index " + std::to_string(i) +
                                                         " is outside the vocabulary [0, " +
                                                         std::to_string(vocab) + ")");
    }
  }
  const int64_t V = tc.vocab_size;
  for (int64_t done = 0; done < n; done += m.max_chunk) {
    const int64_t T = std::min(m.max_chunk, n - done);
    float* out = all_logits ? logits + done * V : logits;
    m.forward_chunk(ids.data() + done, T, out, all_logits, done + T == n);
  }
  return Ok{};
}

Result<void> CpuForward::decode(int32_t id, float* logits) {
  return prefill(std::span<const int32_t>(&id, 1), logits, false);
}

void CpuForward::reset() {
  impl_->pos = 0;
  if (impl_->quiet) impl_->quiet->reset();
  if (impl_->ring) impl_->ring->reset();
}
int64_t CpuForward::position() const { return impl_->pos; }
int64_t CpuForward::vocab_size() const { return impl_->cfg.text.vocab_size; }

void CpuForward::set_layer_hook(LayerHook hook, void* ctx) {
  impl_->hook = hook;
  impl_->hook_ctx = ctx;
}

void CpuForward::set_quiescence(const QuiescenceConfig* q) {
  Impl& m = *impl_;
  m.quiet = q ? std::make_unique<Quiescence>(*q, int(m.cfg.text.num_hidden_layers),
                                             m.cfg.text.hidden_size, m.max_chunk)
              : nullptr;
}

const QuiescenceStats* CpuForward::quiescence_stats() const {
  return impl_->quiet ? &impl_->quiet->stats() : nullptr;
}

size_t CpuForward::kv_bytes() const { return impl_->kv.bytes(); }

KvRingAccess* CpuForward::kv_ring() { return impl_->ring ? this : nullptr; }

const KvRing& CpuForward::ring() const {
  INFER_CHECK(impl_->ring != nullptr, "ring() outside ring mode");
  return *impl_->ring;
}

void CpuForward::set_eviction_sink(EvictionSink* sink) { impl_->sink = sink; }

Result<void> CpuForward::set_recall(const KvBlock& b) {
  Impl& m = *impl_;
  INFER_CHECK(m.ring != nullptr, "set_recall outside ring mode");
  return place_recall(*m.ring, m.kv, b,
                      [&](int layer, int32_t slot, const float* k, const float* v) -> Result<void> {
                        m.kv.write_row(layer, slot, k, v);
                        return Ok{};
                      });
}

Result<void> CpuForward::read_kv(int64_t pos, int64_t n, KvBlock* out) const {
  const Impl& m = *impl_;
  INFER_CHECK(m.ring != nullptr, "read_kv outside ring mode");
  return read_ring_kv(*m.ring, m.kv, pos, n, out);
}

Result<void> CpuForward::synthesize_context(int64_t n, uint64_t seed) {
  Impl& m = *impl_;
  if (n < 0 || (!m.ring && n >= m.max_positions)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "synthesize_context: " + std::to_string(n) + " tokens, max_positions " +
                          std::to_string(m.max_positions));
  }
  if (m.ring) m.ring->synthesize_context(n);
  m.kv.fill_synthetic(seed);
  m.pos = n;
  return Ok{};
}

}  // namespace infer
