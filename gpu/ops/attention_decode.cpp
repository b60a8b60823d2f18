// The default decode attention (T = 1) in two dispatches: attend_scores.comp (scores and
// per-block softmax stats), then attend_pv.comp (softmax · V over key ranges, the last range
// adding the partials up). Grids and tunables; the tunables are gpu/tuning.h's attn_* fields.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "base/check.h"
#include "gpu/context.h"
#include "gpu/ops/attention.h"
#include "gpu/ops/attention_pipelines.h"
#include "shaders/attention.h"

namespace infer::gpu {
namespace {

static_assert(sizeof(shader::DecodeAttendPush) == 11 * sizeof(uint32_t),
              "DecodeAttendPush: 32-bit scalars");

}  // namespace

// Made once per AttentionOps::create. At E2B's 640 keys every K/V byte is read in 1-5 us at
// the H200's bandwidth: the passes are bound by memory latency, so the knobs trade loads in
// flight per invocation (registers) against workgroups (parallelism) and serial rounds.
DecodeKnobs decode_knobs(const GpuTuning& t, uint32_t max_workgroup_invocations) {
  DecodeKnobs k;
  // Pass 1: keys each subgroup loads at once per round (their d/subgroup elements each, all
  // issued before the first product): K registers = keys x d / subgroup size a lane.
  k.keys_per_subgroup = t.attn_keys_per_subgroup;
  // Pass 1: workgroups per head group at most (more keys make each loop over more rounds); also
  // the block stats pass 2 reads per head (a subgroup per head reduces them).
  k.score_groups = t.attn_score_groups;
  // Pass 2: output dims per workgroup (lanes reading one V row piece together: 32 = 128 bytes),
  // and the workgroup size, rounded down to a multiple of them (the rest are key lanes).
  k.pv_dims = t.attn_pv_dims;
  const uint32_t max_inv = std::max(1u, max_workgroup_invocations);
  k.pv_dims = std::min(k.pv_dims, max_inv);
  k.pv_invocations = std::min(t.attn_pv_invocations, max_inv);
  k.pv_invocations = std::max(k.pv_dims, k.pv_invocations / k.pv_dims * k.pv_dims);
  // Pass 2: V rows each invocation loads at once per round; a round covers key lanes x unroll
  // keys.
  k.pv_unroll = t.attn_pv_unroll;
  // Pass 2: keys per range at least (default one round), and ranges at most (each range's
  // workgroups write a partial the last one reads; <= INFER_ATTN_MAX_SPLITS, the scratch).
  const uint32_t round = k.pv_invocations / k.pv_dims * k.pv_unroll;
  k.pv_min_keys = t.attn_pv_keys > 0 ? t.attn_pv_keys : round;
  k.pv_splits = std::min(t.attn_pv_splits, kMaxSplits);
  return k;
}

AttentionOps::DecodeGrid AttentionOps::decode_grid(const AttentionDims& dims) const {
  const Pipelines& p = *p_;
  const uint32_t keys = max_decode_keys(dims, p.limits.max_positions);
  DecodeGrid g{};
  // Unpinned subgroups: the host counts the fewest a workgroup may have (the block the shader
  // loops over is a multiple of it either way).
  g.score_block =
      std::max(1u, p.lanes.local_size / p.lanes.largest) * p.knobs.keys_per_subgroup;
  g.score_groups = std::clamp(div_up(keys, g.score_block), 1u, p.knobs.score_groups);
  g.pv_min_keys = p.knobs.pv_min_keys;
  g.pv_splits = std::clamp(div_up(keys, g.pv_min_keys), 1u, p.knobs.pv_splits);
  return g;
}

Result<void> AttentionOps::attend_decode(Recorder& rec, Binding step, const AttentionDims& dims,
                                         Binding q, Binding k_cache, Binding v_cache,
                                         Binding out, Binding inv_freq) const {
  const Pipelines& p = *p_;
  const uint32_t group = dims.n_q / dims.n_kv;
  const DecodeGrid g = decode_grid(dims);
  shader::DecodeAttendPush push{};
  push.n_q = dims.n_q;
  push.n_kv = dims.n_kv;
  push.d = dims.d;
  push.slots = dims.slots;
  push.window = dims.window;
  push.heads_per_group = std::min(group, p.decode_rows);
  push.key_stride = p.limits.max_positions;
  push.score_groups = g.score_groups;
  push.score_block = g.score_block;
  push.pv_splits = g.pv_splits;
  push.pv_min_keys = g.pv_min_keys;
  const uint32_t heads = push.heads_per_group;
  const uint32_t head_groups = dims.n_kv * div_up(group, heads);
  // attend_pv's counters: one per (dim chunk, head group).
  INFER_CHECK(uint64_t(div_up(dims.d, p.knobs.pv_dims)) * head_groups * sizeof(uint32_t) <=
                  p.counters.size(),
              "attend: %u dim chunks x %u head groups of counters", div_up(dims.d, p.knobs.pv_dims),
              head_groups);

  using A = Access;
  const Pipeline* scores_pass = nullptr;
  const Pipeline* pv_pass = nullptr;
  // Per head count and d: q rows in shared memory and the d loops sized exactly.
  INFER_TRY(scores_pass, p.cached({"attend_scores", dims.mode, heads, dims.d}, [&] {
    return p.desc("attend_scores", {A::kRead, A::kRead, A::kRead, A::kWrite, A::kRead, A::kWrite},
                  sizeof(shader::DecodeAttendPush),
                  {{INFER_ATTN_SPEC_MAX_SUBGROUPS, p.max_subgroups},
                   {INFER_ATTN_SPEC_ROWS, heads},
                   {INFER_ATTN_SPEC_MAX_D, dims.d},
                   {INFER_ATTN_SPEC_KEYS_PER_SUBGROUP, p.knobs.keys_per_subgroup},
                   {INFER_ATTN_SPEC_D_CHUNKS, div_up(dims.d, p.lanes.smallest)}},
                  dims.mode);
  }));
  INFER_TRY(pv_pass, p.cached({"attend_pv", dims.mode, heads, 0}, [&] {
    // Its own workgroup size (a multiple of the dim chunk), not the lanes' pinned subgroups.
    PipelineDesc desc;
    desc.variant = "attend_pv";
    desc.bindings = {A::kRead, A::kRead, A::kRead, A::kWrite, A::kRead, A::kReadWrite,
                     A::kReadWrite};
    desc.push_bytes = sizeof(shader::DecodeAttendPush);
    desc.spec = {{INFER_ATTN_SPEC_LOCAL_SIZE, p.knobs.pv_invocations},
                 {INFER_ATTN_SPEC_ROWS, heads},
                 {INFER_ATTN_SPEC_DCHUNK, p.knobs.pv_dims},
                 {INFER_ATTN_SPEC_PV_UNROLL, p.knobs.pv_unroll},
                 {INFER_ATTN_SPEC_KV_MODE, dims.mode}};
    return desc;
  }));
  const Binding scores{&p.scores}, stats{&p.stats};
  INFER_TRY_VOID(rec.dispatch(*scores_pass, {step, q, k_cache, scores, inv_freq, stats}, push,
                              Groups{g.score_groups, 1, head_groups}));
  return rec.dispatch(*pv_pass,
                      {step, scores, v_cache, out, stats, Binding{&p.scratch},
                       Binding{&p.counters}},
                      push, Groups{div_up(dims.d, p.knobs.pv_dims), g.pv_splits, head_groups});
}

}  // namespace infer::gpu
