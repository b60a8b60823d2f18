// The opt-in one-dispatch decode attention (INFER_ATTN_SPLIT=1, attend_split.comp): split over
// keys, every load of a tile issued before it is needed, merged by the last split. Session 14
// rewrote it (session 4's form, slices of dims each recomputing the scores with one load in
// flight at a time, took 87 us a layer on E2B and 166 on 12B at 640 keys on the H200).
#include <algorithm>

#include "gpu/ops/attention.h"
#include "gpu/ops/attention_pipelines.h"
#include "shaders/attention.h"

namespace infer::gpu {
namespace {

// Keys a tile: each invocation holds its dims of the tile's V rows in registers (kSplitTile x
// ceil(d / workgroup) floats), the workgroup's subgroups load the tile's K rows in one round
// (kSplitMaxKeys rows a subgroup at most).
constexpr uint32_t kSplitTile = 32;
constexpr uint32_t kSplitMaxKeys = 8;
// Invocations a workgroup: one per dim of a 256-wide head, so a 32-key tile holds 32 V values
// an invocation (64 at d 512).
constexpr uint32_t kSplitInvocations = 256;

}  // namespace

uint32_t split_min_keys() {
  // Keys a split at least (whole tiles): fewer make more workgroups load at once but give the
  // merging workgroup more partials to read. INFER_ATTN_SPLIT_KEYS, read at create.
  const uint32_t keys = env_uint("INFER_ATTN_SPLIT_KEYS", 2 * kSplitTile, 1, 1u << 20);
  return div_up(keys, kSplitTile) * kSplitTile;
}

uint32_t AttentionOps::decode_splits(const AttentionDims& dims) const {
  if (!p_->split_decode) return 0;
  return std::clamp(div_up(max_decode_keys(dims, p_->limits.max_positions), p_->split_keys), 1u,
                    kMaxSplits);
}

uint32_t AttentionOps::decode_min_keys_per_split() const { return p_->split_keys; }

Result<void> AttentionOps::attend_split(Recorder& rec, Binding step, const AttentionDims& dims,
                                        Binding q, Binding k_cache, Binding v_cache, Binding out,
                                        Binding inv_freq) const {
  const Pipelines& p = *p_;
  const uint32_t group = dims.n_q / dims.n_kv;
  const uint32_t heads = std::min(group, p.decode_rows);
  const uint32_t head_groups = dims.n_kv * div_up(group, heads);
  const DeviceInfo& info = p.ctx->info();
  const uint32_t sub = p.lanes.subgroup;
  const uint32_t local =
      sub * std::max(1u, std::min(kSplitInvocations, info.max_workgroup_invocations) / sub);
  using A = Access;
  const Pipeline* pipeline = nullptr;
  // Per head count and d: q rows in shared memory and the d loops sized exactly.
  INFER_TRY(pipeline, p.cached({"attend_split", dims.mode, heads, dims.d}, [&] {
    // Keys a subgroup a round: the tile in one round of the workgroup's (fewest) subgroups.
    const uint32_t fewest = std::max(1u, local / p.lanes.largest);
    return p.desc("attend_split",
                  {A::kRead, A::kRead, A::kRead, A::kRead, A::kWrite, A::kReadWrite,
                   A::kReadWrite, A::kRead},
                  sizeof(shader::AttendPush),
                  {{INFER_ATTN_SPEC_MAX_SUBGROUPS, std::max(1u, local / p.lanes.smallest)},
                   {INFER_ATTN_SPEC_ROWS, heads},
                   {INFER_ATTN_SPEC_TILE, kSplitTile},
                   {INFER_ATTN_SPEC_MAX_D, dims.d},
                   {INFER_ATTN_SPEC_DIMS, div_up(dims.d, local)},
                   {INFER_ATTN_SPEC_KEYS_PER_SUBGROUP,
                    std::clamp(div_up(kSplitTile, fewest), 1u, kSplitMaxKeys)},
                   {INFER_ATTN_SPEC_D_CHUNKS, div_up(dims.d, p.lanes.smallest)}},
                  dims.mode, local);
  }));
  const shader::AttendPush sp = attend_push(dims, decode_splits(dims), heads, 1, p.split_keys);
  return rec.dispatch(*pipeline,
                      {step, q, k_cache, v_cache, out, Binding{&p.scratch}, Binding{&p.counters},
                       inv_freq},
                      sp, Groups{1, sp.n_splits, head_groups});
}

}  // namespace infer::gpu
