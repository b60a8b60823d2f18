// The opt-in one-dispatch decode attention (INFER_ATTN_SPLIT=1, attend_split.comp): split over
// keys and dim slices, merged by the last split. Slower than the two passes on the H200 so far
// (87 us a layer on E2B, 166 on 12B at 640 keys, session 4); kept as a tested alternative.
#include <algorithm>

#include "gpu/ops/attention.h"
#include "gpu/ops/attention_pipelines.h"
#include "shaders/attention.h"

namespace infer::gpu {
namespace {

// Tiles of kSplitTile keys whose V values each invocation holds in registers; a split gets at
// least one tile (fewer keys per split would make the one merging workgroup of a slice read
// more partials than the split itself reads K/V rows), at most kMaxSplits, enough with the dim
// slices and KV heads to spread 64K keys over a big GPU. Each subgroup loads up to
// kSplitMaxKeys K rows at once (their dot products live in registers).
constexpr uint32_t kSplitTile = 32;
constexpr uint32_t kSplitMaxKeys = 8;

}  // namespace

uint32_t AttentionOps::decode_splits(const AttentionDims& dims) const {
  if (!p_->split_decode) return 0;
  return std::clamp(div_up(max_decode_keys(dims, p_->limits.max_positions), kSplitTile), 1u,
                    kMaxSplits);
}

uint32_t AttentionOps::decode_min_keys_per_split() const { return kSplitTile; }

Result<void> AttentionOps::attend_split(Recorder& rec, Binding step, const AttentionDims& dims,
                                        Binding q, Binding k_cache, Binding v_cache, Binding out,
                                        Binding inv_freq) const {
  const Pipelines& p = *p_;
  const uint32_t group = dims.n_q / dims.n_kv;
  const uint32_t heads = std::min(group, p.decode_rows);
  const uint32_t head_groups = dims.n_kv * div_up(group, heads);
  using A = Access;
  const Pipeline* pipeline = nullptr;
  INFER_TRY(pipeline, p.cached({"attend_split", dims.mode, 0, 0}, [&] {
    // Keys per subgroup: the tile in one pass of the workgroup's (fewest) subgroups.
    const uint32_t fewest = std::max(1u, p.lanes.local_size / p.lanes.largest);
    return p.desc("attend_split",
                  {A::kRead, A::kRead, A::kRead, A::kRead, A::kWrite, A::kReadWrite,
                   A::kReadWrite, A::kRead},
                  sizeof(shader::AttendPush),
                  {{INFER_ATTN_SPEC_ROWS, p.decode_rows},
                   {INFER_ATTN_SPEC_TILE, kSplitTile},
                   {INFER_ATTN_SPEC_MAX_D, p.limits.max_d},
                   {INFER_ATTN_SPEC_KEYS_PER_SUBGROUP,
                    std::clamp(div_up(kSplitTile, fewest), 1u, kSplitMaxKeys)},
                   {INFER_ATTN_SPEC_D_CHUNKS, div_up(p.limits.max_d, p.lanes.smallest)}},
                  dims.mode);
  }));
  const shader::AttendPush sp = attend_push(dims, decode_splits(dims), heads, 1, kSplitTile);
  return rec.dispatch(*pipeline,
                      {step, q, k_cache, v_cache, out, Binding{&p.scratch}, Binding{&p.counters},
                       inv_freq},
                      sp, Groups{div_up(dims.d, p.lanes.local_size), sp.n_splits, head_groups});
}

}  // namespace infer::gpu
