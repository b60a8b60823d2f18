// Quiescence on the Vulkan path (DESIGN.md §6, docs/QUIESCENCE.md "GPU"): the split decode step,
// the copies that bring probe rows and carried-from snapshots to the host, and the decision,
// taken by model/quiescence.h's Quiescence exactly as CpuForward takes it.
//
// Why a split at the skip depth d, with the host deciding in between: the decision needs the
// velocities of this token's stream at the probes (all at or below d), and whichever way it goes
// the work after d differs wholesale (all upper layers, or a few K/V rows). Two recordings of the
// upper part (full, carried), chosen per token, keep every recording fixed and replayable, and
// the decision runs in the same code as the CPU's. The price is one extra submit and host wait per
// token, paid only when quiescence is on; off, decode replays its one recording as before.
//
// The carried streams (x_d + s_j - s_d, GEMMA4_TEXT.md has no such op) are formed on the host
// from the probe row of x_d and the snapshots s_j, with the CPU's own float expression, and copied
// to the device: a few rows of H floats, and no new shader.
#include <algorithm>
#include <cstring>
#include <string>

#include "base/check.h"
#include "gpu/gpu_forward_impl.h"
#include "model/quiescence.h"

namespace infer::gpu {

Result<void> GpuForward::set_quiescence(const QuiescenceConfig* cfg) {
  Impl& m = *impl_;
  // Prefill recordings hold the probe and snapshot copies only while it is on: record anew.
  m.chunks.clear();
  m.quiet.reset();
  if (cfg == nullptr) return Ok{};
  if (m.mass) {
    // A skipped token attends nowhere above d, and the recordings' mass accumulation assumes
    // every tiered layer ran: not combined yet.
    return make_error(ErrorCode::kUnsupported,
                      "--quiescence with --evict mass is not on the GPU path yet");
  }
  const ModelConfig& mc = m.model->config();
  const int L = mc.text.num_hidden_layers;
  const int64_t H = mc.text.hidden_size, C = m.max_chunk;
  auto g = std::make_unique<GpuQuiet>(*cfg, L, H, C);
  const int d = g->q.skip_depth();
  for (int i = 0; i <= d; ++i) {
    if (g->q.is_probe(i)) g->probe_layers.push_back(i);
  }
  // What a skipped token reads (CpuForward::Impl::quiescence_after): s_{j-1} for each skipped
  // layer j that owns KV, and s_{L-1}; s_d is the deepest probe's row.
  g->snap_layer.assign(size_t(L), 0);
  for (int j = d + 1; j < L; ++j) {
    if (mc.layers[size_t(j)].kv_shared) continue;
    g->kv_layers.push_back(j);
    if (j - 1 > d) g->snap_layer[size_t(j - 1)] = 1;
  }
  if (L - 1 > d) g->snap_layer[size_t(L - 1)] = 1;
  const VkDeviceSize row = VkDeviceSize(H) * sizeof(float);
  const VulkanContext& ctx = *m.ctx;
  INFER_TRY(g->probes, Buffer::create(ctx, row * C * g->probe_layers.size(), BufferKind::kHost,
                                      "quiescence: probe rows"));
  INFER_TRY(g->snaps, Buffer::create(ctx, row * L, BufferKind::kHost, "quiescence: snapshots"));
  INFER_TRY(g->carry, Buffer::create(ctx, row * (g->kv_layers.size() + 1), BufferKind::kHost,
                                     "quiescence: carried rows"));
  m.quiet = std::move(g);
  GpuQuiet& q = *m.quiet;
  Result<void> made = [&]() -> Result<void> {
    INFER_TRY(q.lower, Recorder::create(ctx));
    INFER_TRY_VOID(m.record(*q.lower, 1, Head::kNone, Part::kLower));
    for (Head head : {Head::kLast, Head::kArgmax}) {
      INFER_TRY_VOID(m.quiet_recording(head, Part::kUpper));
      INFER_TRY_VOID(m.quiet_recording(head, Part::kCarried));
    }
    return Ok{};
  }();
  if (!made.ok()) m.quiet.reset();
  return made;
}

const QuiescenceStats* GpuForward::quiescence_stats() const {
  return impl_->quiet ? &impl_->quiet->q.stats() : nullptr;
}

Result<Recorder*> GpuForward::Impl::quiet_recording(Head head, Part part) {
  auto& slot = (part == Part::kUpper ? quiet->upper : quiet->carried)[size_t(head)];
  if (slot == nullptr) {
    INFER_TRY(std::unique_ptr<Recorder> rec, Recorder::create(*ctx));
    INFER_TRY_VOID(record(*rec, 1, head, part));
    slot = std::move(rec);
  }
  return slot.get();
}

void GpuForward::Impl::record_quiet_copies(Recorder& rec, uint32_t T, int layer) {
  const GpuQuiet& g = *quiet;
  const VkDeviceSize row = VkDeviceSize(model->config().text.hidden_size) * sizeof(float);
  const auto k = std::find(g.probe_layers.begin(), g.probe_layers.end(), layer);
  if (k != g.probe_layers.end()) {
    const VkDeviceSize at = VkDeviceSize(k - g.probe_layers.begin()) * VkDeviceSize(max_chunk);
    rec.copy(a.x, 0, g.probes, at * row, T * row);
  }
  if (g.snap_layer[size_t(layer)]) rec.copy(a.x, (T - 1) * row, g.snaps, layer * row, row);
}

Result<void> GpuForward::Impl::record_carried(Recorder& rec) {
  // carry (the host's): row r = the input of kv_layers[r], the last row = the stream after L-1.
  const GpuQuiet& g = *quiet;
  const TextConfig& tc = model->config().text;
  const uint32_t H = uint32_t(tc.hidden_size);
  const float eps = float(tc.rms_norm_eps);
  const VkDeviceSize row = VkDeviceSize(H) * sizeof(float);
  for (size_t r = 0; r < g.kv_layers.size(); ++r) {
    const int j = g.kv_layers[r];
    rec.copy(g.carry, r * row, a.x, 0, row);
    INFER_TRY_VOID(ops.norm->rms_norm(rec, whole(a.x), weights->layers[size_t(j)].input_layernorm,
                                      whole(a.h), 1, H, eps));
    // q is computed beside K/V (one stacked matvec) and left unused: E2B's skipped layers are
    // all KV-shared, so this costs nothing there.
    INFER_TRY_VOID(record_kv_rows(rec, j));
  }
  rec.copy(g.carry, g.kv_layers.size() * row, a.x, 0, row);
  return ops.norm->rms_norm(rec, whole(a.x), weights->norm, whole(a.h), 1, H, eps);
}

Result<void> GpuForward::Impl::quiet_submit(Recorder& rec, int64_t T) {
  GpuQuiet& g = *quiet;
  Quiescence& q = g.q;
  const int L = model->config().text.num_hidden_layers;
  const int64_t H = model->config().text.hidden_size;
  const int d = q.skip_depth();
  const size_t row_bytes = size_t(H) * sizeof(float);
  timing.submit_s = timing.wait_s = 0;
  auto replay = [&](Recorder& r) -> Result<void> {
    INFER_TRY_VOID(r.submit());
    INFER_TRY_VOID(r.wait());
    timing.submit_s += r.last_timing().submit_s;
    timing.wait_s += r.last_timing().wait_s;
    return Ok{};
  };
  const float* probes = static_cast<const float*>(g.probes.mapped());
  const float* x_d = probes + (int64_t(g.probe_layers.size() - 1) * max_chunk + T - 1) * H;
  // In CpuForward's order: every probe's rows, then the decision.
  auto observe = [&]() {
    for (size_t k = 0; k < g.probe_layers.size(); ++k) {
      q.observe(g.probe_layers[k], probes + int64_t(k) * max_chunk * H, T);
    }
  };
  // A fully computed chunk: its last row after the layers a skipped token carries from.
  auto full = [&]() {
    std::memcpy(q.snapshot(d), x_d, row_bytes);
    const float* snaps = static_cast<const float*>(g.snaps.mapped());
    for (int i = d + 1; i < L; ++i) {
      if (g.snap_layer[size_t(i)]) std::memcpy(q.snapshot(i), snaps + i * H, row_bytes);
    }
    q.mark_full();
    q.stats().last_skipped = false;
  };
  if (T > 1) {  // a prefill chunk (never skipped): its whole recording holds the copies
    INFER_TRY_VOID(replay(rec));
    observe();
    q.decide(T, false);
    full();
    return Ok{};
  }
  // A single token: `rec` (decode's or a prefill chunk's) names the head; its lower part runs.
  Head head = Head::kNone;
  if (&rec == decode_logits.get()) {
    head = Head::kLast;
  } else if (&rec == decode_greedy.get()) {
    head = Head::kArgmax;
  } else {
    const auto c = std::find_if(chunks.begin(), chunks.end(),
                                [&](const Chunk& k) { return k.rec.get() == &rec; });
    if (c == chunks.end()) {
      return make_error(ErrorCode::kUnsupported, "quiescence: a one-token recording of its own "
                                                 "(--profile) is not split; turn it off");
    }
    head = c->head;
  }
  INFER_TRY_VOID(replay(*g.lower));
  observe();
  const bool skip = q.decide(1, true);
  q.stats().tokens += 1;
  if (!skip) {
    INFER_TRY(Recorder * upper, quiet_recording(head, Part::kUpper));
    INFER_TRY_VOID(replay(*upper));
    full();
    return Ok{};
  }
  // Skipped (CpuForward::Impl::quiescence_after): layer j > d owning KV gets the carried input
  // x_d + (s_{j-1} - s_d); the stream gets x_d + (s_{L-1} - s_d).
  float* carry = static_cast<float*>(g.carry.mapped());
  const float* base = q.snapshot(d);
  for (size_t r = 0; r < g.kv_layers.size(); ++r) {
    const float* before = q.snapshot(g.kv_layers[r] - 1);
    float* out = carry + int64_t(r) * H;
    for (int64_t k = 0; k < H; ++k) out[k] = x_d[k] + (before[k] - base[k]);
  }
  const float* top = q.snapshot(L - 1);
  float* out = carry + int64_t(g.kv_layers.size()) * H;
  for (int64_t k = 0; k < H; ++k) out[k] = x_d[k] + (top[k] - base[k]);
  INFER_TRY(Recorder * carried, quiet_recording(head, Part::kCarried));
  INFER_TRY_VOID(replay(*carried));
  q.stats().skipped_tokens += 1;
  q.stats().skipped_layers += L - 1 - d;
  q.stats().last_skipped = true;
  return Ok{};
}

}  // namespace infer::gpu
