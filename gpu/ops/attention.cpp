// Attention ops: q/k/v norm + RoPE + cache write in one dispatch (shaders/qkv_prep.comp); the
// pipelines (one per KV mode, made on first use) and buffers shared with prefill
// (attention_prefill.cpp: split-K flash attention) and the decode paths (attention_decode.cpp:
// two passes; attention_split.cpp: opt-in one dispatch).
#include "gpu/ops/attention.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/check.h"
#include "gpu/context.h"
#include "gpu/ops/attention_pipelines.h"
#include "shaders/attention.h"
#include "shaders/step.h"

namespace infer::gpu {
namespace {

static_assert(sizeof(shader::QkvPrepPush) == 9 * sizeof(uint32_t), "QkvPrepPush: 32-bit scalars");
static_assert(sizeof(shader::AttendPush) == 10 * sizeof(uint32_t), "AttendPush: 32-bit scalars");
static_assert(sizeof(shader::AttendPrepPush) == 14 * sizeof(uint32_t),
              "AttendPrepPush: 32-bit scalars");
static_assert(sizeof(shader::KvCommitPush) == 3 * sizeof(uint32_t), "KvCommitPush: 32-bit scalars");

// As matvec: enough invocations for coalesced rows of d = 256/512 on 32- and 64-wide GPUs.
constexpr uint32_t kTargetInvocations = 128;
// Query rows per attend workgroup: decode holds the GQA group of one KV head (8 for Gemma 4),
// the old prefill kernel (attend.comp) also a few tokens, so each K/V row loaded serves up to
// 16 queries.
constexpr uint32_t kDecodeRows = 8;
constexpr uint32_t kPrefillRows = 16;
// Prefill partials per row that the scratch holds for max_T tokens (attention_prefill.cpp
// splits within what the scratch holds).
constexpr uint32_t kPrefillSplits = 4;

uint32_t floor_pow2(uint32_t x) {
  uint32_t p = 1;
  while (p * 2 <= x) p *= 2;
  return p;
}

// Bytes a binding holds from its offset on (its range, or the rest of the buffer).
VkDeviceSize bytes_of(const Binding& b) {
  const VkDeviceSize rest = b.buffer->size() - b.offset;
  return b.range == VK_WHOLE_SIZE ? rest : std::min(rest, b.range);
}

void check_floats(const char* op, const char* what, const Binding& b, uint64_t floats) {
  INFER_CHECK(b.buffer != nullptr, "%s: no %s buffer", op, what);
  INFER_CHECK(b.offset <= b.buffer->size() && bytes_of(b) >= floats * sizeof(float),
              "%s: %s \"%s\" holds fewer than %llu floats", op, what, b.buffer->name().c_str(),
              (unsigned long long)floats);
}

// The raw token row holds the q heads, then (n_kv > 0) K and V heads at their offsets.
void check_qkv_row(const char* op, const QkvShape& s) {
  const uint64_t q_row = uint64_t(s.n_q) * s.d, kv_row = uint64_t(s.n_kv) * s.d;
  INFER_CHECK(s.stride >= q_row && (s.n_kv == 0 || (s.k_offset >= q_row &&
                                                    s.k_offset + kv_row <= s.stride &&
                                                    s.v_offset >= q_row &&
                                                    s.v_offset + kv_row <= s.stride)),
              "%s: token row of %u floats, k at %u, v at %u for %u q and %u kv heads of %u", op,
              s.stride, s.k_offset, s.v_offset, s.n_q, s.n_kv, s.d);
}

}  // namespace

// The most keys a decode token sees: the window, or every ring slot (tiered: and the token's
// staging row); its position is below max_positions. Decode grids are sized for it; workgroups
// past the keys of the current position return at once.
uint32_t max_decode_keys(const AttentionDims& dims, uint32_t max_positions) {
  const uint32_t full = dims.slots + (dims.mode == INFER_KV_TIERED ? 1 : 0);
  return std::min(dims.window > 0 ? std::min(dims.window, dims.slots) : full, max_positions);
}

shader::AttendPush attend_push(const AttentionDims& dims, uint32_t n_splits,
                               uint32_t heads_per_group, uint32_t tokens_per_group,
                               uint32_t min_keys) {
  shader::AttendPush push{};
  push.T = dims.T;
  push.n_q = dims.n_q;
  push.n_kv = dims.n_kv;
  push.d = dims.d;
  push.slots = dims.slots;
  push.window = dims.window;
  push.n_splits = n_splits;
  push.heads_per_group = heads_per_group;
  push.tokens_per_group = tokens_per_group;
  push.min_keys = min_keys;
  return push;
}

Result<const Pipeline*> AttentionOps::Pipelines::cached(
    const Key& key, const std::function<PipelineDesc()>& make) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    INFER_CHECK(std::get<1>(key) <= INFER_KV_SLIDING, "attention: KV mode %u", std::get<1>(key));
    std::unique_ptr<Pipeline> pipeline;
    INFER_TRY(pipeline, Pipeline::create(*ctx, make()));
    it = cache_.emplace(key, std::move(pipeline)).first;
  }
  return it->second.get();
}

PipelineDesc AttentionOps::Pipelines::desc(const char* variant, std::vector<Access> bindings,
                                           uint32_t push_bytes, std::vector<SpecConstant> spec,
                                           uint32_t mode, uint32_t local_size) const {
  PipelineDesc desc;
  desc.variant = variant;
  desc.bindings = std::move(bindings);
  desc.push_bytes = push_bytes;
  desc.spec = std::move(spec);
  desc.spec.push_back({INFER_ATTN_SPEC_LOCAL_SIZE, local_size > 0 ? local_size : lanes.local_size});
  desc.spec.push_back({INFER_ATTN_SPEC_KV_MODE, mode});
  desc.required_subgroup_size = lanes.pin ? lanes.subgroup : 0;
  return desc;
}

AttentionOps::~AttentionOps() = default;

AttentionLanes attention_lanes(const DeviceInfo& info) {
  AttentionLanes l;
  l.subgroup = std::max(1u, info.subgroup_size);
  l.local_size =
      l.subgroup * std::max(1u, std::min(kTargetInvocations, info.max_workgroup_invocations) /
                                    l.subgroup);
  l.pin = info.compute_required_subgroup_size && info.compute_full_subgroups &&
          l.subgroup >= info.min_subgroup_size && l.subgroup <= info.max_subgroup_size;
  l.smallest = l.pin ? l.subgroup : std::max(1u, info.min_subgroup_size);
  l.largest = l.pin ? l.subgroup : std::max(1u, info.max_subgroup_size);
  return l;
}

Result<std::unique_ptr<AttentionOps>> AttentionOps::create(const VulkanContext& ctx,
                                                           const Limits& limits) {
  if (limits.max_T == 0 || limits.max_n_q == 0 || limits.max_d < 2 || limits.max_d % 2 != 0 ||
      limits.max_positions == 0) {
    return make_error(ErrorCode::kShape,
                      "attention: limits max_T " + std::to_string(limits.max_T) + ", max_n_q " +
                          std::to_string(limits.max_n_q) + ", max_d " +
                          std::to_string(limits.max_d) + ", max_positions " +
                          std::to_string(limits.max_positions));
  }
  const DeviceInfo& info = ctx.info();
  std::unique_ptr<AttentionOps> op(new AttentionOps());
  op->p_ = std::make_unique<Pipelines>();
  Pipelines& p = *op->p_;
  p.ctx = &ctx;
  p.limits = limits;
  p.lanes = attention_lanes(info);
  p.max_subgroups = std::max(1u, p.lanes.local_size / p.lanes.smallest);
  const GpuTuning& tuning = ctx.tuning();
  p.knobs = decode_knobs(tuning, info.max_workgroup_invocations);
  // The one-dispatch decode (attention_split.cpp) for head dims up to kSplitMaxD, the two passes
  // above (SplitDecode::kAuto; attn_split on: every dim, off: none). Side by side on the H200
  // (profiled at 640 keys): E2B's d-256 layers
  // 12.2 us against 8.9 + 8.8, 12B's 18.9 against 7.7 + 12.4, but d 512 21.5 against 21.5
  // (E2B) and 29.2 against 22.6 (12B); all split, E2B Q4_0 341.8 / 327.5 t/s against
  // 325.6 / 322.8, 12B Q4_0 177.7 against 178.8.
  p.split_decode = tuning.attn_split == Choice::kOn    ? SplitDecode::kAll
                   : tuning.attn_split == Choice::kOff ? SplitDecode::kNone
                                                       : SplitDecode::kAuto;
  p.split_keys = split_min_keys(tuning);
  p.split_heads = split_heads(tuning);
  p.split_tile = split_small_tile(tuning);
  // qkv_prep folded into the split decode (prep_attend; attn_prep off: apart). On the H200: E2B
  // Q4_0 342.7 / 344.7 t/s against 337.9 apart, 12B Q4_0 178.2 / 177.2 against 175.7; 12B's
  // d-256 layers 21.6 us against 19.1 + 5.5.
  p.fuse_prep = tuning.attn_prep;

  // Shared q rows (ROWS x max_d floats) take at most half of the device's shared memory.
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(ctx.physical_device(), &props);
  const uint32_t shared_bytes = props.limits.maxComputeSharedMemorySize;
  p.max_shared_bytes = shared_bytes;
  const uint32_t rows_fit = shared_bytes / 2 / (limits.max_d * uint32_t(sizeof(float)));
  if (rows_fit == 0) {
    return make_error(ErrorCode::kUnsupported,
                      "attention: head dim " + std::to_string(limits.max_d) + " needs more than " +
                          std::to_string(shared_bytes) + " bytes of shared memory");
  }
  p.decode_rows = std::min(kDecodeRows, floor_pow2(rows_fit));
  p.prefill_rows = std::min(kPrefillRows, floor_pow2(rows_fit));
  p.prefill = prefill_knobs(tuning, shared_bytes, std::min(info.max_workgroup_invocations,
                                                   props.limits.maxComputeWorkGroupSize[0]));

  using A = Access;
  INFER_TRY(p.commit, Pipeline::create(ctx, p.desc("kv_commit", {A::kRead, A::kReadWrite,
                                                                 A::kReadWrite},
                                                   sizeof(shader::KvCommitPush), {},
                                                   INFER_KV_EXACT)));
  INFER_TRY(p.evict_copy,
            Pipeline::create(ctx, p.desc("kv_evict_copy", {A::kRead, A::kRead, A::kRead,
                                                           A::kWrite},
                                         sizeof(shader::KvEvictCopyPush), {}, INFER_KV_EXACT)));
  INFER_TRY(p.scores, Buffer::create(ctx,
                                     uint64_t(limits.max_n_q) * limits.max_positions *
                                         sizeof(float),
                                     BufferKind::kDevice, "attention decode scores"));
  INFER_TRY(p.stats, Buffer::create(ctx,
                                    uint64_t(limits.max_n_q) * p.knobs.score_groups * 2 *
                                        sizeof(float),
                                    BufferKind::kDevice, "attention decode block stats"));

  // Partials (o [d], m, l) per split and query row, for the most splits any record may use.
  // Split decode: o [splits, n_q, d], then (m, l) [splits, n_q] pairs; two-pass decode: o
  // [pv splits, n_q, d] (pv splits <= kMaxSplits).
  const uint64_t row_floats = uint64_t(limits.max_n_q) * (limits.max_d + 2);
  p.scratch_floats = std::max<uint64_t>(kMaxSplits * row_floats,
                                        uint64_t(kPrefillSplits) * limits.max_T * row_floats);
  INFER_TRY(p.scratch, Buffer::create(ctx, p.scratch_floats * sizeof(float), BufferKind::kDevice,
                                      "attention split-K scratch"));
  // At most one counter per query row (split decode: per head group; attend_pv: per dim chunk
  // and head group); zero at the start, and the merging workgroup of each dispatch sets its
  // counter back to zero.
  const uint32_t columns = std::max(limits.max_T, div_up(limits.max_d, p.knobs.pv_dims));
  const std::vector<uint32_t> zeros(size_t(columns) * limits.max_n_q, 0u);
  INFER_TRY(p.counters, Buffer::create(ctx, zeros.size() * sizeof(uint32_t), BufferKind::kDevice,
                                       "attention split counters"));
  INFER_TRY_VOID(upload(ctx, p.counters, 0, zeros.data(), zeros.size() * sizeof(uint32_t)));
  return op;
}

Result<void> AttentionOps::qkv_prep(Recorder& rec, Binding step, const QkvShape& s, Binding qkv,
                                    Binding q_norm, Binding k_norm, Binding inv_freq,
                                    Binding q_out, Binding k_cache, Binding v_cache) const {
  const Pipelines& p = *p_;
  INFER_CHECK(s.T >= 1 && s.T <= p.limits.max_T, "qkv_prep: T %u (max %u)", s.T, p.limits.max_T);
  INFER_CHECK(s.d >= 2 && s.d % 2 == 0 && s.d <= p.limits.max_d, "qkv_prep: d %u (max %u)", s.d,
              p.limits.max_d);
  INFER_CHECK(s.n_q >= 1, "qkv_prep: no query heads");
  const uint64_t q_row = uint64_t(s.n_q) * s.d, kv_row = uint64_t(s.n_kv) * s.d;
  check_qkv_row("qkv_prep", s);
  check_floats("qkv_prep", "step", step, INFER_STEP_IDS);  // words, 4 bytes like floats
  check_floats("qkv_prep", "qkv", qkv, uint64_t(s.T) * s.stride);
  check_floats("qkv_prep", "q_norm", q_norm, s.d);
  check_floats("qkv_prep", "inv_freq", inv_freq, s.d / 2);
  check_floats("qkv_prep", "q_out", q_out, uint64_t(s.T) * q_row);
  if (s.n_kv > 0) {
    INFER_CHECK(s.slots >= s.T, "qkv_prep: slots %u for T %u", s.slots, s.T);
    check_floats("qkv_prep", "k_norm", k_norm, s.d);
    // Tiered ring layers stage the chunk's rows after the ring's slots.
    const uint64_t rows = uint64_t(s.slots) + (s.mode == INFER_KV_TIERED ? s.T : 0);
    check_floats("qkv_prep", "k_cache", k_cache, rows * kv_row);
    check_floats("qkv_prep", "v_cache", v_cache, rows * kv_row);
  } else {
    // A KV-shared layer writes no K/V: unused bindings still need a buffer, and these add no
    // dependency the dispatch does not have anyway.
    k_norm = q_norm;
    if (k_cache.buffer == nullptr) k_cache = q_out;
    if (v_cache.buffer == nullptr) v_cache = q_out;
  }

  shader::QkvPrepPush push{};
  push.T = s.T;
  push.n_q = s.n_q;
  push.n_kv = s.n_kv;
  push.d = s.d;
  push.slots = std::max(1u, s.slots);
  push.stride = s.stride;
  push.k_offset = s.k_offset;
  push.v_offset = s.v_offset;
  push.eps = s.eps;
  using A = Access;
  const Pipeline* pipeline = nullptr;
  INFER_TRY(pipeline, p.cached({"qkv_prep", s.mode, 0, 0}, [&] {
    PipelineDesc desc = p.desc("qkv_prep",
                               {A::kRead, A::kRead, A::kRead, A::kRead, A::kRead, A::kWrite,
                                A::kWrite, A::kWrite},
                               sizeof(shader::QkvPrepPush), {}, s.mode);
    // An invocation owns a RoPE pair: no more invocations than the widest head has pairs (the
    // fixtures' d = 16/32 left 7/8 of a 128-wide group idle, real work on a CPU device).
    const uint32_t sub = p.lanes.subgroup;
    const uint32_t local = std::min(p.lanes.local_size, div_up(p.limits.max_d / 2, sub) * sub);
    for (SpecConstant& c : desc.spec) {
      if (c.id == INFER_ATTN_SPEC_LOCAL_SIZE) c.value = local;
    }
    desc.spec.push_back({INFER_ATTN_SPEC_MAX_SUBGROUPS, std::max(1u, local / p.lanes.smallest)});
    return desc;
  }));
  return rec.dispatch(*pipeline, {step, qkv, q_norm, k_norm, inv_freq, q_out, k_cache, v_cache},
                      push, Groups{s.n_q + 2 * s.n_kv, s.T, 1});
}

Result<void> AttentionOps::attend(Recorder& rec, Binding step, const AttentionDims& dims,
                                  Binding q, Binding k_cache, Binding v_cache, Binding out,
                                  Binding inv_freq) const {
  const Pipelines& p = *p_;
  INFER_CHECK(dims.T >= 1 && dims.T <= p.limits.max_T, "attend: T %u (max %u)", dims.T,
              p.limits.max_T);
  INFER_CHECK(dims.n_kv >= 1 && dims.n_q % dims.n_kv == 0 && dims.n_q <= p.limits.max_n_q,
              "attend: n_q %u, n_kv %u (max n_q %u)", dims.n_q, dims.n_kv, p.limits.max_n_q);
  INFER_CHECK(dims.d >= 1 && dims.d <= p.limits.max_d, "attend: d %u (max %u)", dims.d,
              p.limits.max_d);
  INFER_CHECK(dims.slots >= 1, "attend: empty ring");
  const uint64_t rows = uint64_t(dims.T) * dims.n_q * dims.d;
  check_floats("attend", "step", step, INFER_STEP_IDS);
  check_floats("attend", "q", q, rows);
  check_floats("attend", "out", out, rows);
  const uint64_t cache_rows = uint64_t(dims.slots) + (dims.mode == INFER_KV_TIERED ? dims.T : 0);
  check_floats("attend", "k_cache", k_cache, cache_rows * dims.n_kv * dims.d);
  check_floats("attend", "v_cache", v_cache, cache_rows * dims.n_kv * dims.d);
  if (dims.mode != INFER_KV_EXACT) {
    check_floats("attend", "inv_freq", inv_freq, dims.d / 2);
  } else if (inv_freq.buffer == nullptr) {
    inv_freq = q;  // read by no invocation; a binding still needs a buffer
  }

  if (dims.T == 1) {
    return decode_splits(dims) > 0 ? attend_split(rec, step, dims, q, k_cache, v_cache, out, inv_freq)
                          : attend_decode(rec, step, dims, q, k_cache, v_cache, out, inv_freq);
  }
  return attend_prefill(rec, step, dims, q, k_cache, v_cache, out, inv_freq);
}

Result<void> AttentionOps::prep_attend(Recorder& rec, Binding step, const QkvShape& qs,
                                       const AttentionDims& dims, Binding qkv, Binding q_norm,
                                       Binding k_norm, Binding inv_freq, Binding q_out,
                                       Binding k_cache, Binding v_cache, Binding out,
                                       Binding out_int8) const {
  INFER_CHECK(qs.T == dims.T && qs.n_q == dims.n_q && qs.d == dims.d && qs.mode == dims.mode &&
                  (qs.n_kv == 0 || (qs.n_kv == dims.n_kv && qs.slots == dims.slots)),
              "prep_attend: qkv shape (T %u, n_q %u, n_kv %u, d %u, slots %u, mode %u) against "
              "attention (T %u, n_q %u, n_kv %u, d %u, slots %u, mode %u)",
              qs.T, qs.n_q, qs.n_kv, qs.d, qs.slots, qs.mode, dims.T, dims.n_q, dims.n_kv,
              dims.d, dims.slots, dims.mode);
  if (!fused_prep(dims)) {
    INFER_CHECK(out_int8.buffer == nullptr, "prep_attend: int8 output without the fused kernel");
    const bool writes = qs.n_kv > 0;
    INFER_TRY_VOID(qkv_prep(rec, step, qs, qkv, q_norm, k_norm, inv_freq, q_out,
                            writes ? k_cache : Binding{}, writes ? v_cache : Binding{}));
    return attend(rec, step, dims, q_out, k_cache, v_cache, out, inv_freq);
  }
  // qkv_prep's and attend's checks, in one dispatch.
  const uint64_t q_row = uint64_t(qs.n_q) * qs.d;
  check_qkv_row("prep_attend", qs);
  INFER_CHECK(dims.n_kv >= 1 && dims.n_q % dims.n_kv == 0 && dims.n_q <= p_->limits.max_n_q &&
                  dims.d >= 2 && dims.d % 2 == 0 && dims.d <= p_->limits.max_d &&
                  dims.slots >= 1,
              "prep_attend: n_q %u, n_kv %u, d %u, slots %u", dims.n_q, dims.n_kv, dims.d,
              dims.slots);
  check_floats("prep_attend", "step", step, INFER_STEP_IDS);
  check_floats("prep_attend", "qkv", qkv, qs.stride);
  check_floats("prep_attend", "q_norm", q_norm, qs.d);
  check_floats("prep_attend", "inv_freq", inv_freq, qs.d / 2);
  check_floats("prep_attend", "q_out", q_out, q_row);
  check_floats("prep_attend", "out", out, q_row);
  const uint64_t cache_rows = uint64_t(dims.slots) + (dims.mode == INFER_KV_TIERED ? 1 : 0);
  check_floats("prep_attend", "k_cache", k_cache, cache_rows * dims.n_kv * dims.d);
  check_floats("prep_attend", "v_cache", v_cache, cache_rows * dims.n_kv * dims.d);
  if (qs.n_kv > 0) {
    check_floats("prep_attend", "k_norm", k_norm, qs.d);
  } else {
    k_norm = q_norm;  // read by no invocation's result; a binding still needs a buffer
  }
  if (out_int8.buffer != nullptr) {
    INFER_CHECK(writes_int8_out(dims), "prep_attend: no int8 output for d %u", dims.d);
    const uint64_t bytes = int8_x_bytes(1, q_row);
    INFER_CHECK(out_int8.buffer->size() >= out_int8.offset + bytes,
                "prep_attend: out_int8 \"%s\" holds under %llu bytes",
                out_int8.buffer->name().c_str(), (unsigned long long)bytes);
  }
  const SplitPrep prep{qs, q_norm, k_norm, q_out, out_int8};
  return attend_split(rec, step, dims, qkv, k_cache, v_cache, out, inv_freq, &prep);
}

Result<void> AttentionOps::kv_commit(Recorder& rec, Binding step, uint32_t T, uint32_t row,
                                     uint32_t slots, Binding k_cache, Binding v_cache) const {
  const Pipelines& p = *p_;
  INFER_CHECK(T >= 1 && T <= p.limits.max_T && row >= 1, "kv_commit: T %u (max %u), row %u", T,
              p.limits.max_T, row);
  check_floats("kv_commit", "step", step, INFER_STEP_WRITES(uint64_t(T)) + T);
  check_floats("kv_commit", "k_cache", k_cache, (uint64_t(slots) + T) * row);
  check_floats("kv_commit", "v_cache", v_cache, (uint64_t(slots) + T) * row);
  shader::KvCommitPush push{};
  push.T = T;
  push.row = row;
  push.slots = slots;
  return rec.dispatch(*p.commit, {step, k_cache, v_cache}, push, Groups{T, 1, 1});
}

Result<void> AttentionOps::kv_evict_copy(Recorder& rec, Binding step, uint32_t T, uint32_t row,
                                         uint32_t slots, Binding k_cache, Binding v_cache,
                                         Binding staging, uint32_t k_dst, uint32_t v_dst) const {
  const Pipelines& p = *p_;
  INFER_CHECK(T >= 1 && T <= p.limits.max_T && row >= 1, "kv_evict_copy: T %u (max %u), row %u",
              T, p.limits.max_T, row);
  check_floats("kv_evict_copy", "k_cache", k_cache, uint64_t(slots) * row);
  check_floats("kv_evict_copy", "v_cache", v_cache, uint64_t(slots) * row);
  check_floats("kv_evict_copy", "staging", staging,
               std::max(uint64_t(k_dst), uint64_t(v_dst)) + uint64_t(T) * row);
  shader::KvEvictCopyPush push{};
  push.T = T;
  push.row = row;
  push.k_dst = k_dst;
  push.v_dst = v_dst;
  return rec.dispatch(*p.evict_copy, {step, k_cache, v_cache, staging}, push, Groups{T, 1, 1});
}

}  // namespace infer::gpu
