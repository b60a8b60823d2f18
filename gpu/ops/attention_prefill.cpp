// Prefill attention (T > 1) in one dispatch of split-K flash attention whose last split merges:
// the register-blocked kernel (attend_tiled.comp) by default; the subgroup kernel (attend.comp)
// with attn_prefill=old in the context's tuning (read at create) or for a head
// dim the tiled kernel does not take. Both share the grid and the scratch (shaders/attention.h).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "gpu/ops/attention.h"
#include "gpu/ops/attention_pipelines.h"
#include "shaders/attention.h"

namespace infer::gpu {
namespace {

// attend.comp: keys a tile (its shared scores are ROWS x kOldTile floats) and the fewest keys
// of a split (fewer would cost more in the merge than they save: the merging workgroup reads
// splits x rows x d partials).
constexpr uint32_t kOldTile = 32;
constexpr uint32_t kOldMinKeys = 2 * kOldTile;
// Prefill splits only to reach this many workgroups (about two per SM of a big GPU, 132 on the
// H200); the last tokens' workgroups see the most keys, so splitting also evens out the causal
// triangle's work.
constexpr uint32_t kTargetGroups = 256;
// attend_tiled.comp: an invocation's output block is 4 rows x 4 · DIM_VECS dims in registers.
constexpr uint32_t kMaxDimVecs = 8;

// The tiled kernel's shape for one head dim; rows == 0: it does not take the head dim.
struct TiledShape {
  uint32_t rows = 0, tile = 0, slice = 0, v_keys = 0, stage_vecs = 0;
  uint32_t local_size() const { return rows / 4 * (tile / 4); }
};

// The shader's staging region (floats): a Q/K slice (rows padded by 4), a V sub-tile (rows of
// 4 · DIM_VECS · TILE/4 floats) or the row partials [ROWS, TILE/4], whichever is largest (the
// merge's weights [ROWS, n_splits] too: splits() keeps n_splits within it).
uint32_t stage_floats(uint32_t rows, uint32_t tile, uint32_t d, uint32_t slice, uint32_t v_keys) {
  const uint32_t key_groups = tile / 4;
  const uint32_t v_row = 4 * key_groups * div_up(d / 4, key_groups);
  return std::max({(rows + tile) * (slice + 4), v_keys * v_row, rows * key_groups});
}

// Of the slices and V sub-tiles that fit rows x tile in the shared budget, the pair with the
// fewest barriers a tile; rows == 0 if none fits.
TiledShape fit_shape(const PrefillKnobs& k, uint32_t d, uint32_t rows, uint32_t tile) {
  TiledShape s;
  if (rows % 4 != 0 || tile % 16 != 0 || rows / 4 * (tile / 4) > k.max_invocations ||
      div_up(d / 4, tile / 4) > kMaxDimVecs) {
    return s;
  }
  uint32_t best_barriers = ~0u;
  for (uint32_t slice = 16; slice <= 128; slice *= 2) {
    for (uint32_t v_keys = 4; v_keys <= tile; v_keys *= 2) {
      if (tile % v_keys != 0) continue;
      const uint32_t stage = div_up(stage_floats(rows, tile, d, slice, v_keys), 4) * 4;
      if (uint64_t(stage + rows * tile) * sizeof(float) > k.shared_bytes) continue;
      const uint32_t barriers = 2 * div_up(d / 2, slice / 2) + 2 * (tile / v_keys);
      if (barriers < best_barriers) {  // ties keep the smaller slice and sub-tile
        best_barriers = barriers;
        s = TiledShape{rows, tile, slice, v_keys, stage / 4};
      }
    }
  }
  return s;
}

// Defaults: 64 rows and 128 keys (512 invocations, a 32 KB P tile, output blocks of 4 x 32 floats
// at d = 256, 4 x 64 at 512; in NVIDIA's 48 KB slices of 16 dims, V sub-tiles of 16 keys at d =
// 256, 8 at 512). H200, 12B Q4_0 prefill of 512 (profiled side by side): the
// 40 sliding layers (d 256) 368 -> 266 us, the 8 full (d 512) 1,159 -> 591, prefill 2,924 ->
// 3,079 t/s, against the previous defaults, which devices with less shared memory take: 64 rows
// and 64 keys for d <= 256 (E2B's sliding layers: 8 tokens x 8 heads; 12B's: 32 tokens x 2
// heads), 32 rows and 128 keys above (256 invocations, a 16 KB P tile). Less still (lavapipe:
// 32 KB) takes smaller slices and sub-tiles, then smaller blocks.
TiledShape tiled_shape(const PrefillKnobs& k, uint32_t d) {
  if (k.old || d == 0 || d % 4 != 0) return TiledShape{};
  if (k.rows > 0 || k.tile > 0) {
    const uint32_t rows = k.rows > 0 ? k.rows : d <= 256 ? 64 : 32;
    return fit_shape(k, d, rows, k.tile > 0 ? k.tile : 4096 / rows);
  }
  TiledShape s = fit_shape(k, d, 64, 128);
  if (s.rows == 0) s = fit_shape(k, d, d <= 256 ? 64 : 32, d <= 256 ? 64 : 128);
  if (s.rows == 0) s = fit_shape(k, d, 32, 64);
  if (s.rows == 0) s = fit_shape(k, d, 16, 64);
  return s;
}

}  // namespace

PrefillKnobs prefill_knobs(const GpuTuning& t, uint32_t max_shared_bytes,
                           uint32_t max_invocations) {
  PrefillKnobs k;
  k.old = t.attn_prefill == PrefillAttention::kOld;
  // Query rows a workgroup (tokens x the GQA heads of one KV head) and keys a tile; their
  // product / 16 invocations (a 4 x 4 score block each). Rows trade the grid's size and the
  // output registers (4 x d / (tile / 4) floats an invocation) against K/V reuse.
  k.rows = t.attn_prefill_rows / 4 * 4;
  k.tile = t.attn_prefill_tile / 16 * 16;
  // Keys a split at least (rounded up to whole tiles): more splits fill the GPU and even out the
  // causal triangle, each costs its rows' partials through the merge.
  k.min_keys = t.attn_prefill_keys;
  // Shared memory a workgroup may take: more than 48 KB allows larger slices and V sub-tiles
  // (fewer barriers) where the device has it, at fewer resident workgroups.
  k.shared_bytes = std::min(max_shared_bytes, t.attn_prefill_shared);
  k.max_invocations = max_invocations;
  return k;
}

bool AttentionOps::tiled_prefill(const AttentionDims& dims) const {
  return dims.T > 1 && tiled_shape(p_->prefill, dims.d).rows > 0;
}

uint32_t AttentionOps::min_keys_per_split(const AttentionDims& dims) const {
  if (!tiled_prefill(dims)) return kOldMinKeys;
  const uint32_t tile = tiled_shape(p_->prefill, dims.d).tile;
  return div_up(std::max(p_->prefill.min_keys, tile), tile) * tile;
}

uint32_t AttentionOps::splits(const AttentionDims& dims) const {
  const Pipelines& p = *p_;
  const uint32_t group = dims.n_q / dims.n_kv;
  const TiledShape shape = dims.T > 1 ? tiled_shape(p.prefill, dims.d) : TiledShape{};
  const uint32_t rows = dims.T == 1 ? p.decode_rows : shape.rows > 0 ? shape.rows : p.prefill_rows;
  const uint32_t heads = std::min(group, rows);
  const uint32_t tokens = dims.T == 1 ? 1 : rows / heads;
  // The most keys one workgroup's queries can see: W + tokens - 1 on a sliding layer, else
  // the whole ring.
  const uint32_t keys = dims.window > 0 ? std::min(dims.window + tokens - 1, dims.slots)
                        : dims.slots + (dims.mode == INFER_KV_TIERED ? dims.T : 0);
  uint32_t n = std::clamp(div_up(keys, min_keys_per_split(dims)), 1u, kMaxSplits);
  if (dims.T > 1) {
    const uint32_t groups = div_up(dims.T, tokens) * dims.n_kv * div_up(group, heads);
    n = std::min(n, div_up(kTargetGroups, groups));
  }
  // The tiled kernel's merge weights [ROWS, n_splits] share its staging region.
  if (shape.rows > 0) n = std::min(n, shape.stage_vecs * 4 / shape.rows);
  const uint64_t per_split = uint64_t(dims.T) * dims.n_q * (dims.d + 2);
  return uint32_t(std::clamp<uint64_t>(p.scratch_floats / per_split, 1, n));
}

Result<void> AttentionOps::attend_prefill(Recorder& rec, Binding step, const AttentionDims& dims,
                                          Binding q, Binding k_cache, Binding v_cache,
                                          Binding out, Binding inv_freq) const {
  const Pipelines& p = *p_;
  const uint32_t group = dims.n_q / dims.n_kv;
  const TiledShape shape = tiled_shape(p.prefill, dims.d);
  const uint32_t rows = shape.rows > 0 ? shape.rows : p.prefill_rows;
  const uint32_t heads = std::min(group, rows);
  const shader::AttendPush push =
      attend_push(dims, splits(dims), heads, rows / heads, min_keys_per_split(dims));
  const Groups groups{push.n_splits, div_up(dims.T, push.tokens_per_group),
                      dims.n_kv * div_up(group, push.heads_per_group)};
  // One counter per (y, z) workgroup column; each holds at least one query row.
  INFER_CHECK(uint64_t(groups.y) * groups.z <= uint64_t(p.limits.max_T) * p.limits.max_n_q,
              "attend: %u x %u counters", groups.y, groups.z);
  using A = Access;
  const std::vector<Access> bindings = {A::kRead,  A::kRead,      A::kRead,      A::kRead,
                                        A::kWrite, A::kReadWrite, A::kReadWrite, A::kRead};
  const Pipeline* pipeline = nullptr;
  if (shape.rows > 0) {
    // Per head dim: d is a specialization constant (slices, V rows and output blocks sized
    // exactly). Its own workgroup size; no subgroup operations, so no pinned subgroup size.
    INFER_TRY(pipeline, p.cached({"attend_tiled", dims.mode, shape.rows, dims.d}, [&] {
      PipelineDesc desc;
      desc.variant = "attend_tiled";
      desc.bindings = bindings;
      desc.push_bytes = sizeof(shader::AttendPush);
      desc.spec = {{INFER_ATTN_SPEC_LOCAL_SIZE, shape.local_size()},
                   {INFER_ATTN_SPEC_ROWS, shape.rows},
                   {INFER_ATTN_SPEC_TILE, shape.tile},
                   {INFER_ATTN_SPEC_MAX_D, dims.d},
                   {INFER_ATTN_SPEC_SLICE, shape.slice},
                   {INFER_ATTN_SPEC_V_KEYS, shape.v_keys},
                   {INFER_ATTN_SPEC_STAGE_VECS, shape.stage_vecs},
                   {INFER_ATTN_SPEC_KV_MODE, dims.mode}};
      return desc;
    }));
  } else {
    INFER_TRY(pipeline, p.cached({"attend", dims.mode, 0, 0}, [&] {
      return p.desc("attend", bindings, sizeof(shader::AttendPush),
                    {{INFER_ATTN_SPEC_ROWS, p.prefill_rows},
                     {INFER_ATTN_SPEC_TILE, kOldTile},
                     {INFER_ATTN_SPEC_MAX_D, p.limits.max_d},
                     {INFER_ATTN_SPEC_DIMS, div_up(p.limits.max_d, p.lanes.local_size)}},
                    dims.mode);
    }));
  }
  return rec.dispatch(*pipeline,
                      {step, q, k_cache, v_cache, out, Binding{&p.scratch}, Binding{&p.counters},
                       inv_freq},
                      push, groups);
}

}  // namespace infer::gpu
