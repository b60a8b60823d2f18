// The one-dispatch decode attention (attend_split.comp; the default up to d 256, attention.cpp):
// split over keys, every load of a tile issued before it is needed, merged by the last split.
// Session 15 rewrote it without subgroup reductions (a key's K row read by LANES invocations
// together, their parts meeting in shared memory) and with a head a workgroup by default;
// the earlier form (a subgroup a key, subgroupAdd per key and head, all of a KV head's query
// heads in one workgroup: 10 workgroups on E2B at 640 keys) took 42 us a layer on E2B and 28 on
// 12B on the H200, against ~18-20 for the two passes. Session 16 folded qkv_prep into it
// (attend_split_prep.glsl, prep_attend): one dependent dispatch a layer less.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "gpu/context.h"
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
uint32_t split_tile(uint32_t d, uint32_t small_d_tile) { return d > 256 ? 16 : small_d_tile; }

// The kernel's shape for dims: query heads a workgroup, its invocations and keys a tile.
struct SplitShape {
  uint32_t heads, head_groups, tile, local;
};

// decode_rows, max_heads, small_d_tile: the op's (Pipelines) knobs.
SplitShape split_shape(const AttentionDims& dims, uint32_t decode_rows, uint32_t max_heads,
                       uint32_t small_d_tile, uint32_t max_invocations) {
  SplitShape s;
  const uint32_t group = dims.n_q / dims.n_kv;
  s.heads = std::min({group, decode_rows, max_heads});
  s.head_groups = dims.n_kv * div_up(group, s.heads);
  s.tile = split_tile(dims.d, small_d_tile);
  s.local = std::max(1u, std::min(kSplitInvocations, max_invocations) / s.tile) * s.tile;
  return s;
}

// attend_split.comp's shared memory in bytes (prep: with attend_split_prep.glsl's).
uint32_t split_shared_bytes(const SplitShape& s, uint32_t d, bool prep) {
  uint32_t floats = s.heads * d + s.heads * s.local + 2 * s.heads * s.tile + 3 * s.heads +
                    2 * s.heads * kMaxSplits + 1;
  if (prep) floats += (s.heads + 2) * (d + div_up(d, 16u)) + 2 * d;
  return floats * uint32_t(sizeof(float));
}

}  // namespace

uint32_t split_min_keys(const GpuTuning& t) {
  // Keys a split at least (the shader rounds up to whole tiles: 32 keys up to d 256, 16 above):
  // fewer make more workgroups load at once but give the merging workgroup more partials to
  // read.
  return div_up(t.attn_split_keys, 16u) * 16;
}

uint32_t split_heads(const GpuTuning& t) {
  // Query heads a workgroup at most (of one KV head): each group of them reads the KV head's
  // keys again (from L2 after the first), but the splits' workgroups multiply by the groups.
  return t.attn_split_heads;
}

uint32_t split_small_tile(const GpuTuning& t) {
  // Keys a tile up to d 256 (LOCAL_SIZE / tile invocations share a key): 8, 16 or 32.
  const uint32_t tile = t.attn_split_tile;
  return tile >= 32 ? 32 : tile >= 16 ? 16 : 8;
}

uint32_t AttentionOps::decode_splits(const AttentionDims& dims) const {
  const SplitDecode mode = p_->split_decode;
  if (mode == SplitDecode::kNone || (mode == SplitDecode::kAuto && dims.d > kSplitMaxD)) return 0;
  return std::clamp(div_up(max_decode_keys(dims, p_->limits.max_positions), p_->split_keys), 1u,
                    kMaxSplits);
}

uint32_t AttentionOps::decode_min_keys_per_split() const { return p_->split_keys; }

bool AttentionOps::fused_prep(const AttentionDims& dims) const {
  const Pipelines& p = *p_;
  if (!p.fuse_prep || dims.T != 1 || decode_splits(dims) == 0) return false;
  const SplitShape s = split_shape(dims, p.decode_rows, p.split_heads, p.split_tile,
                                   p.ctx->info().max_workgroup_invocations);
  return split_shared_bytes(s, dims.d, true) <= p.max_shared_bytes;
}

bool AttentionOps::writes_int8_out(const AttentionDims& dims) const {
  return fused_prep(dims) && dims.d % 32 == 0;
}

Result<void> AttentionOps::attend_split(Recorder& rec, Binding step, const AttentionDims& dims,
                                        Binding q, Binding k_cache, Binding v_cache, Binding out,
                                        Binding inv_freq, const SplitPrep* prep) const {
  const Pipelines& p = *p_;
  const SplitShape s = split_shape(dims, p.decode_rows, p.split_heads, p.split_tile,
                                   p.ctx->info().max_workgroup_invocations);
  const uint32_t lanes = s.local / s.tile;
  const bool out_int8 = prep != nullptr && prep->out_int8.buffer != nullptr;
  const char* variant = out_int8 ? "attend_split_prep_int8"
                        : prep != nullptr ? "attend_split_prep"
                                          : "attend_split";
  using A = Access;
  std::vector<Access> access = {A::kRead,  A::kRead,      A::kRead,      A::kRead,
                                A::kWrite, A::kReadWrite, A::kReadWrite, A::kRead};
  if (prep != nullptr) {
    access[2] = access[3] = A::kReadWrite;  // the token's K/V rows
    access.insert(access.end(), {A::kRead, A::kRead, A::kWrite});  // q_norm, k_norm, q_out
    if (out_int8) access.push_back(A::kWrite);
  }
  const Pipeline* pipeline = nullptr;
  // Per head count and d: q rows in shared memory and the d loops sized exactly.
  INFER_TRY(pipeline, p.cached({variant, dims.mode, s.heads, dims.d}, [&] {
    return p.desc(variant, access,
                  prep != nullptr ? sizeof(shader::AttendPrepPush) : sizeof(shader::AttendPush),
                  {{INFER_ATTN_SPEC_ROWS, s.heads},
                   {INFER_ATTN_SPEC_TILE, s.tile},
                   {INFER_ATTN_SPEC_MAX_D, dims.d},
                   {INFER_ATTN_SPEC_DIMS, div_up(dims.d, s.local)},
                   {INFER_ATTN_SPEC_SLICE, div_up(dims.d, lanes)}},
                  dims.mode, s.local);
  }));
  const shader::AttendPush sp = attend_push(dims, decode_splits(dims), s.heads, 1, p.split_keys);
  const Groups groups{1, sp.n_splits, s.head_groups};
  std::vector<Binding> bindings = {step, q,   k_cache, v_cache, out, Binding{&p.scratch},
                                   Binding{&p.counters}, inv_freq};
  if (prep == nullptr) return rec.dispatch(*pipeline, bindings, &sp, uint32_t(sizeof(sp)), groups);
  static_assert(offsetof(shader::AttendPrepPush, k_offset) == sizeof(shader::AttendPush),
                "AttendPrepPush starts with AttendPush's fields");
  shader::AttendPrepPush pp{};
  std::memcpy(&pp, &sp, sizeof(sp));
  pp.k_offset = prep->shape.k_offset;
  pp.v_offset = prep->shape.v_offset;
  pp.prep_kv = prep->shape.n_kv > 0 ? 1 : 0;
  pp.eps = prep->shape.eps;
  bindings.insert(bindings.end(), {prep->q_norm, prep->k_norm, prep->q_out});
  if (out_int8) bindings.push_back(prep->out_int8);
  return rec.dispatch(*pipeline, bindings, &pp, uint32_t(sizeof(pp)), groups);
}

}  // namespace infer::gpu
