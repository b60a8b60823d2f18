// GpuForward: create (upload, rings, ops, buffers, the two decode recordings), prefill in chunks
// and decode by replaying a recording. The host writes the step buffer and gathers the PLE rows,
// submits once and waits once per chunk or token.
#include "gpu/gpu_forward.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "base/check.h"
#include "gpu/context.h"
#include "gpu/gpu_forward_impl.h"
#include "model/thread_pool.h"
#include "shaders/attention.h"
#include "shaders/step.h"

namespace infer::gpu {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Prefill recordings kept at once: full chunks, the last partial chunk and a few other lengths.
constexpr size_t kKeptChunkRecordings = 4;

}  // namespace

GpuForward::GpuForward() : impl_(std::make_unique<Impl>()) {}
GpuForward::~GpuForward() = default;

int64_t default_prefill_chunk(const VulkanContext& ctx) { return ctx.tuning().prefill_chunk; }

std::vector<std::pair<std::string, std::string>> effective_tuning(const VulkanContext& ctx,
                                                                  const ModelConfig& cfg) {
  GpuTuning t = ctx.tuning();
  t.int_dot = resolved_int_dot(t, ctx.info(), cfg.text.hidden_size) ? Choice::kOn : Choice::kOff;
  return tuning_fields(t);
}

Result<std::unique_ptr<GpuForward>> GpuForward::create(VulkanContext& ctx, const Model& model,
                                                       ThreadPool& pool, int64_t max_positions,
                                                       int64_t max_chunk) {
  return make(ctx, model, pool, max_positions, max_chunk, nullptr);
}

Result<std::unique_ptr<GpuForward>> GpuForward::create(VulkanContext& ctx, const Model& model,
                                                       ThreadPool& pool, const RingConfig& ring,
                                                       int64_t max_chunk) {
  INFER_TRY_VOID(validate(ring));
  if (max_chunk <= 0) {
    return make_error(ErrorCode::kInvalidArgument,
                      "gpu forward: max_chunk " + std::to_string(max_chunk));
  }
  // Cache positions stay below max(A + W + R, sliding_window) + chunk for ever: the bound the
  // attention ops size their decode scores for.
  const infer::KvRing probe(ring);
  const int64_t chunk = std::min(max_chunk, probe.max_chunk());
  const int64_t bound =
      std::max<int64_t>(probe.capacity(), model.config().text.sliding_window) + chunk;
  return make(ctx, model, pool, bound, chunk, &ring);
}

Result<std::unique_ptr<GpuForward>> GpuForward::make(VulkanContext& ctx, const Model& model,
                                                     ThreadPool& pool, int64_t max_positions,
                                                     int64_t max_chunk, const RingConfig* ring) {
  if (max_positions <= 0 || max_chunk <= 0 || max_positions > int64_t(UINT32_MAX)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "gpu forward: max_positions " + std::to_string(max_positions) +
                          ", max_chunk " + std::to_string(max_chunk));
  }
  std::unique_ptr<GpuForward> f(new GpuForward());
  Impl& m = *f->impl_;
  m.ctx = &ctx;
  m.model = &model;
  m.pool = &pool;
  m.max_positions = max_positions;
  m.max_chunk = std::min(max_chunk, max_positions);
  const ModelConfig& cfg = model.config();
  if (ring != nullptr) m.ring = std::make_unique<infer::KvRing>(*ring);
  const int64_t tiered = m.ring ? m.ring->capacity() : 0;
  INFER_TRY(m.weights, GpuWeights::upload(ctx, cfg, model.weights(), &pool));
  INFER_TRY(m.kv, GpuKv::create(ctx, cfg, m.max_positions, m.max_chunk, tiered));
  INFER_TRY_VOID(create_ops(ctx, cfg, model.weights(), m.max_positions, m.max_chunk, m.ops));
  INFER_TRY_VOID(create_activations(ctx, cfg, m.max_chunk, tiered, m.a));
  if (m.ring && m.ring->config().evict == EvictPolicy::kMass) {
    INFER_TRY(m.mass, create_mass_ops(ctx, cfg, m.max_chunk, tiered));
  }
  if (m.ring) {
    std::vector<int> layers;
    for (size_t i = 0; i < cfg.layers.size(); ++i) {
      const gpu::KvRing* own = m.kv->own(int(i));
      if (own != nullptr && own->mode == INFER_KV_TIERED) layers.push_back(int(i));
    }
    m.rows = std::make_unique<GpuKvRows>(ctx, *m.kv, std::move(layers));
  }
  // Decode is recorded once here and replayed for every token.
  INFER_TRY(m.decode_logits, Recorder::create(ctx));
  INFER_TRY(m.decode_greedy, Recorder::create(ctx));
  INFER_TRY_VOID(m.record(*m.decode_logits, 1, Head::kLast));
  INFER_TRY_VOID(m.record(*m.decode_greedy, 1, Head::kArgmax));
  return f;
}

Result<void> GpuForward::Impl::check_ids(const int32_t* ids, int64_t n) const {
  const TextConfig& tc = model->config().text;
  const int64_t ple_vocab =
      tc.hidden_size_per_layer_input > 0 ? tc.vocab_size_per_layer_input : tc.vocab_size;
  const int64_t vocab = std::min(tc.vocab_size, ple_vocab);
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return make_error(ErrorCode::kInvalidArgument,
                        "token id " + std::to_string(ids[i]) + " at index " + std::to_string(i) +
                            " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
  }
  if (!ring && pos + n > max_positions) {
    return make_error(ErrorCode::kInvalidArgument,
                      std::to_string(n) + " tokens at position " + std::to_string(pos) +
                          " exceed max_positions " + std::to_string(max_positions));
  }
  return Ok{};
}

Result<void> GpuForward::Impl::ensure_all_logits() {
  if (a.all_logits.handle() != VK_NULL_HANDLE) return Ok{};
  const VkDeviceSize bytes =
      VkDeviceSize(max_chunk) * VkDeviceSize(model->config().text.vocab_size) * sizeof(float);
  INFER_TRY(a.all_logits, Buffer::create(*ctx, bytes, BufferKind::kDevice, "forward: all logits"));
  INFER_TRY(a.all_logits_host,
            Buffer::create(*ctx, bytes, BufferKind::kHost, "forward: all logits (host)"));
  return Ok{};
}

Result<Recorder*> GpuForward::Impl::chunk_recording(uint32_t T, Head head) {
  if (T == 1 && head == Head::kLast) return decode_logits.get();
  ++uses;
  for (Chunk& c : chunks) {
    if (c.T == T && c.head == head) {
      c.last_use = uses;
      return c.rec.get();
    }
  }
  Chunk* slot = nullptr;
  if (chunks.size() < kKeptChunkRecordings) {
    INFER_TRY(std::unique_ptr<Recorder> rec, Recorder::create(*ctx));
    chunks.push_back(Chunk{0, Head::kNone, 0, std::move(rec)});
    slot = &chunks.back();
  } else {
    slot = &*std::min_element(chunks.begin(), chunks.end(), [](const Chunk& x, const Chunk& y) {
      return x.last_use < y.last_use;
    });
  }
  slot->T = 0;  // invalid until recorded
  INFER_TRY_VOID(record(*slot->rec, T, head));
  slot->T = T;
  slot->head = head;
  slot->last_use = uses;
  return slot->rec.get();
}

Result<void> GpuForward::Impl::run(Recorder& rec, const int32_t* ids, int64_t T,
                                   Clock::time_point t0) {
  const TextConfig& tc = model->config().text;
  uint32_t* step = static_cast<uint32_t*>(a.step.mapped());
  step[INFER_STEP_POS0] = uint32_t(pos);
  step[INFER_STEP_T] = uint32_t(T);
  for (int64_t t = 0; t < T; ++t) step[INFER_STEP_IDS + t] = uint32_t(ids[t]);
  const RingPlan* planned = nullptr;
  if (ring) {
    // Slots, victims and cache positions once per chunk (as CpuForward). The victims' rows are
    // copied to the host staging in the chunk's own command buffer before kv_commit overwrites
    // them, and handed to the sink after the wait (none copied without a sink).
    const RingPlan& plan = ring->plan(pos, ids, T);
    planned = &plan;
    const bool stage = sink != nullptr && !plan.evicted.empty();
    INFER_CHECK(!stage || evict_staging.handle() != VK_NULL_HANDLE,
                "an eviction sink without its staging");
    INFER_CHECK(int64_t(plan.evicted.size()) <= T, "%zu evicted by %lld tokens",
                plan.evicted.size(), (long long)T);
    step[INFER_STEP_N_KEYS] = uint32_t(plan.n_keys);
    step[INFER_STEP_N_SLIDE] =
        uint32_t(std::min<int64_t>(pos, int64_t(tc.sliding_window) - 1));
    uint32_t* writes = step + INFER_STEP_WRITES(T);
    for (int64_t t = 0; t < T; ++t) writes[t] = uint32_t(plan.write_slots[size_t(t)]);
    uint32_t* keys = step + INFER_STEP_KEYS(T);
    for (int64_t i = 0; i < plan.n_keys; ++i) keys[i] = uint32_t(plan.key_slots[size_t(i)]);
    uint32_t* evict = step + INFER_STEP_EVICT(T, plan.n_keys);
    evict[0] = stage ? uint32_t(plan.evicted.size()) : 0;
    for (size_t e = 0; stage && e < plan.evicted.size(); ++e) {
      evict[1 + e] = uint32_t(plan.evicted[e].slot);
    }
  }
  const int64_t LP = int64_t(tc.num_hidden_layers) * tc.hidden_size_per_layer_input;
  if (LP > 0) {
    // The PLE table stays in host memory (DESIGN.md §7): gather the chunk's rows (§4.3.1).
    float* rows = static_cast<float*>(a.ple_rows.mapped());
    const Matrix& table = model->weights().embed_tokens_per_layer;
    auto gather = [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) dequantize_row(table, ids[t], rows + t * LP);
    };
    if (T == 1) {
      gather(0, 1);
    } else {
      pool->parallel_for(T, gather);
    }
  }
  timing.host_s = seconds_since(t0);
  if (quiet) {
    // Quiescence (gpu_forward_quiescence.cpp): probes read back, the skip decision, and for a
    // decode token a second submit of the upper layers or of the carried ones.
    INFER_TRY_VOID(quiet_submit(rec, T));
  } else {
    INFER_TRY_VOID(rec.submit());
    INFER_TRY_VOID(rec.wait());
    timing.submit_s = rec.last_timing().submit_s;
    timing.wait_s = rec.last_timing().wait_s;
  }
  if (ring) {
    const RingPlan& plan = *planned;
    if (sink != nullptr && !plan.evicted.empty()) {
      const StagedKvRows staged(*rows, static_cast<const float*>(evict_staging.mapped()),
                                evict_k_off, evict_v_off, plan.evicted);
      sink->on_evict(plan.evicted, staged);
    }
    if (mass) ring->add_mass(mass->host());  // [n_keys] of this chunk, read back at its end
    ring->commit();
  }
  pos += T;
  return Ok{};
}

Result<void> GpuForward::prefill(std::span<const int32_t> ids, float* logits, bool all_logits) {
  Impl& m = *impl_;
  const int64_t n = int64_t(ids.size());
  if (n == 0) return make_error(ErrorCode::kInvalidArgument, "prefill: no tokens");
  INFER_TRY_VOID(m.check_ids(ids.data(), n));
  if (all_logits) INFER_TRY_VOID(m.ensure_all_logits());
  if (m.ring) INFER_TRY_VOID(m.ensure_evict_staging());
  const int64_t V = m.model->config().text.vocab_size;
  for (int64_t done = 0; done < n; done += m.max_chunk) {
    const auto t0 = Clock::now();
    const int64_t T = std::min(m.max_chunk, n - done);
    const bool last = done + T == n;
    const Head head = logits == nullptr ? Head::kNone
                      : all_logits      ? Head::kAll
                      : last            ? Head::kLast
                                        : Head::kNone;
    INFER_TRY(Recorder * rec, m.chunk_recording(uint32_t(T), head));
    INFER_TRY_VOID(m.run(*rec, ids.data() + done, T, t0));
    if (head == Head::kAll) {
      std::memcpy(logits + done * V, m.a.all_logits_host.mapped(), size_t(T * V) * sizeof(float));
    } else if (head == Head::kLast) {
      std::memcpy(logits, m.a.logits_host.mapped(), size_t(V) * sizeof(float));
    }
  }
  return Ok{};
}

Result<void> GpuForward::decode(int32_t id, float* logits) {
  Impl& m = *impl_;
  const auto t0 = Clock::now();
  INFER_TRY_VOID(m.check_ids(&id, 1));
  if (m.ring) INFER_TRY_VOID(m.ensure_evict_staging());
  Recorder& rec = logits != nullptr ? *m.decode_logits : *m.decode_greedy;
  INFER_TRY_VOID(m.run(rec, &id, 1, t0));
  if (logits != nullptr) {
    const size_t V = size_t(m.model->config().text.vocab_size);
    std::memcpy(logits, m.a.logits_host.mapped(), V * sizeof(float));
  }
  return Ok{};
}

Result<int32_t> GpuForward::decode_greedy(int32_t id) {
  Impl& m = *impl_;
  const auto t0 = Clock::now();
  INFER_TRY_VOID(m.check_ids(&id, 1));
  if (m.ring) INFER_TRY_VOID(m.ensure_evict_staging());
  INFER_TRY_VOID(m.run(*m.decode_greedy, &id, 1, t0));
  return int32_t(*static_cast<const uint32_t*>(m.a.id_host.mapped()));
}

void GpuForward::reset() {
  impl_->pos = 0;  // a slot is always written before it is read
  if (impl_->quiet) impl_->quiet->q.reset();
  if (impl_->ring) impl_->ring->reset();
}
int64_t GpuForward::position() const { return impl_->pos; }
int64_t GpuForward::max_chunk() const { return impl_->max_chunk; }
int64_t GpuForward::vocab_size() const { return impl_->model->config().text.vocab_size; }
const StepTiming& GpuForward::last_step_timing() const { return impl_->timing; }

RecordingCounts GpuForward::decode_counts() const {
  const Recorder& r = *impl_->decode_greedy;
  return RecordingCounts{r.dispatch_count(), r.barrier_command_count(), r.barrier_count()};
}

Result<std::vector<CommandTime>> GpuForward::profile(std::span<const int32_t> ids) {
  Impl& m = *impl_;
  const int64_t T = int64_t(ids.size());
  INFER_CHECK(T >= 1 && T <= m.max_chunk, "profile: %lld tokens (max_chunk %lld)", (long long)T,
              (long long)m.max_chunk);
  INFER_TRY_VOID(m.check_ids(ids.data(), T));
  if (m.ring) INFER_TRY_VOID(m.ensure_evict_staging());
  INFER_TRY(std::unique_ptr<Recorder> rec, Recorder::create(*m.ctx));
  INFER_TRY_VOID(rec->set_profiling(true));
  INFER_TRY_VOID(m.record(*rec, uint32_t(T), T == 1 ? Head::kArgmax : Head::kLast));
  INFER_TRY_VOID(m.run(*rec, ids.data(), T, Clock::now()));
  INFER_TRY(std::vector<Recorder::CommandTime> times, rec->command_times());
  std::vector<CommandTime> out;
  out.reserve(times.size());
  for (const Recorder::CommandTime& t : times) out.push_back({t.label, t.us});
  return out;
}

size_t GpuForward::device_bytes() const {
  const Impl& m = *impl_;
  size_t scratch = 0;  // prefill's prepared activations, once a prefill has been recorded
  for (const auto& op : m.ops.matvec) scratch += op != nullptr ? op->scratch_bytes() : 0;
  for (const auto& op : m.ops.gate_up) scratch += op != nullptr ? op->scratch_bytes() : 0;
  return m.weights->bytes + m.kv->bytes() + m.a.bytes + size_t(m.a.all_logits.size()) + scratch;
}

}  // namespace infer::gpu
