// The one-dispatch decode attention (attend_split.comp; the default up to d 256, attention.cpp):
// split over keys, every load of a tile issued before it is needed, merged by the last split.
// Session 15
// rewrote it without subgroup reductions (a key's K row read by LANES invocations together,
// their parts meeting in shared memory) and with a head a workgroup by default; session 14's
// form (a subgroup a key, subgroupAdd per key and head, all of a KV head's query heads in one
// workgroup: 10 workgroups on E2B at 640 keys) took 42 us a layer on E2B and 28 on 12B on the
// H200, against ~18-20 for the two passes.
#include <algorithm>

#include "gpu/ops/attention.h"
#include "gpu/ops/attention_pipelines.h"
#include "shaders/attention.h"

namespace infer::gpu {
namespace {

// Invocations a workgroup (fewer where the device allows fewer), and keys a tile: 32 up to a
// head dim of 256 (8 invocations a key, 32 elements each), 16 above (16 a key at d 512). Each
// invocation holds SLICE K elements and TILE x DIMS V values in registers, 32 + 32 at d 256 or
// 512.
constexpr uint32_t kSplitInvocations = 256;
uint32_t split_tile(uint32_t d) { return d > 256 ? 16 : 32; }

}  // namespace

uint32_t split_min_keys() {
  // Keys a split at least (the shader rounds up to whole tiles: 32 keys up to d 256, 16 above):
  // fewer make more workgroups load at once but give the merging workgroup more partials to
  // read. INFER_ATTN_SPLIT_KEYS, read at create.
  const uint32_t keys = env_uint("INFER_ATTN_SPLIT_KEYS", 16, 1, 1u << 20);
  return div_up(keys, 16u) * 16;
}

uint32_t split_heads() {
  // Query heads a workgroup at most (of one KV head): each group of them reads the KV head's
  // keys again (from L2 after the first), but the splits' workgroups multiply by the groups.
  // INFER_ATTN_SPLIT_HEADS, read at create.
  return env_uint("INFER_ATTN_SPLIT_HEADS", 1, 1, 64);
}

uint32_t AttentionOps::decode_splits(const AttentionDims& dims) const {
  const SplitDecode mode = p_->split_decode;
  if (mode == SplitDecode::kNone || (mode == SplitDecode::kAuto && dims.d > kSplitMaxD)) return 0;
  return std::clamp(div_up(max_decode_keys(dims, p_->limits.max_positions), p_->split_keys), 1u,
                    kMaxSplits);
}

uint32_t AttentionOps::decode_min_keys_per_split() const { return p_->split_keys; }

Result<void> AttentionOps::attend_split(Recorder& rec, Binding step, const AttentionDims& dims,
                                        Binding q, Binding k_cache, Binding v_cache, Binding out,
                                        Binding inv_freq) const {
  const Pipelines& p = *p_;
  const uint32_t group = dims.n_q / dims.n_kv;
  const uint32_t heads = std::min({group, p.decode_rows, p.split_heads});
  const uint32_t head_groups = dims.n_kv * div_up(group, heads);
  const uint32_t tile = split_tile(dims.d);
  const uint32_t local =
      std::max(1u, std::min(kSplitInvocations, p.ctx->info().max_workgroup_invocations) / tile) *
      tile;
  const uint32_t lanes = local / tile;
  using A = Access;
  const Pipeline* pipeline = nullptr;
  // Per head count and d: q rows in shared memory and the d loops sized exactly.
  INFER_TRY(pipeline, p.cached({"attend_split", dims.mode, heads, dims.d}, [&] {
    return p.desc("attend_split",
                  {A::kRead, A::kRead, A::kRead, A::kRead, A::kWrite, A::kReadWrite,
                   A::kReadWrite, A::kRead},
                  sizeof(shader::AttendPush),
                  {{INFER_ATTN_SPEC_ROWS, heads},
                   {INFER_ATTN_SPEC_TILE, tile},
                   {INFER_ATTN_SPEC_MAX_D, dims.d},
                   {INFER_ATTN_SPEC_DIMS, div_up(dims.d, local)},
                   {INFER_ATTN_SPEC_SLICE, div_up(dims.d, lanes)}},
                  dims.mode, local);
  }));
  const shader::AttendPush sp = attend_push(dims, decode_splits(dims), heads, 1, p.split_keys);
  return rec.dispatch(*pipeline,
                      {step, q, k_cache, v_cache, out, Binding{&p.scratch}, Binding{&p.counters},
                       inv_freq},
                      sp, Groups{1, sp.n_splits, head_groups});
}

}  // namespace infer::gpu
