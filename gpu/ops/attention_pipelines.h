// Private to gpu/ops/attention*.cpp: AttentionOps' pipelines (created lazily, one per KV mode and,
// for the decode passes, per head count and head dim), buffers, the decode knobs, and helpers
// the prefill, two-pass and split decode files share.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "base/result.h"
#include "gpu/buffer.h"
#include "gpu/ops/attention.h"
#include "gpu/ops/op_common.h"
#include "gpu/pipeline.h"
#include "shaders/attention.h"

namespace infer::gpu {

constexpr uint32_t kMaxSplits = INFER_ATTN_MAX_SPLITS;
// Which decode attentions take one dispatch (GpuTuning::attn_split: on all, off none, auto: head
// dims up to kSplitMaxD).
enum class SplitDecode { kNone, kAuto, kAll };
constexpr uint32_t kSplitMaxD = 256;

// The two-pass decode's tunables (attention_decode.cpp reads them from the environment once, at
// create, so one build can be swept on a GPU; attention_decode.cpp documents each).
struct DecodeKnobs {
  uint32_t keys_per_subgroup = 2;  // attn_keys_per_subgroup
  uint32_t score_groups = 256;     // attn_score_groups
  uint32_t pv_dims = 32;           // attn_pv_dims
  uint32_t pv_invocations = 256;   // attn_pv_invocations
  uint32_t pv_unroll = 8;          // attn_pv_unroll
  uint32_t pv_min_keys = 64;       // attn_pv_keys
  uint32_t pv_splits = 64;         // attn_pv_splits
};
DecodeKnobs decode_knobs(const GpuTuning& t, uint32_t max_workgroup_invocations);

// Prefill (T > 1): which kernel and the tiled kernel's shape knobs (attention_prefill.cpp takes
// them from the context's tuning once, at create, and documents each).
struct PrefillKnobs {
  bool old = false;               // attn_prefill=old: attend.comp for every prefill
  uint32_t rows = 0;              // attn_prefill_rows (0: by head dim)
  uint32_t tile = 0;              // attn_prefill_tile (0: 4096 / rows)
  uint32_t min_keys = 128;        // attn_prefill_keys
  uint32_t shared_bytes = 49152;  // attn_prefill_shared, at most the device's limit
  uint32_t max_invocations = 0;   // the device's workgroup limit
};
PrefillKnobs prefill_knobs(const GpuTuning& t, uint32_t max_shared_bytes,
                           uint32_t max_invocations);

// attend_split's keys a split at least (attention_split.cpp; attn_split_keys).
uint32_t split_min_keys(const GpuTuning& t);
// attend_split's query heads a workgroup at most (attn_split_heads).
uint32_t split_heads(const GpuTuning& t);
// attend_split's keys a tile up to d 256 (attn_split_tile).
uint32_t split_small_tile(const GpuTuning& t);

struct AttentionOps::Pipelines {
  const VulkanContext* ctx = nullptr;
  Limits limits;
  AttentionLanes lanes;
  uint32_t max_subgroups = 1;  // local_size / lanes.smallest
  uint32_t decode_rows = 0;
  uint32_t prefill_rows = 0;
  DecodeKnobs knobs;
  PrefillKnobs prefill;
  uint64_t scratch_floats = 0;
  // attend_split (one dispatch) for T = 1 where decode_splits() says so, else two passes.
  SplitDecode split_decode = SplitDecode::kAuto;
  uint32_t split_keys = 16;   // attend_split: keys a split at least (split_min_keys())
  uint32_t split_heads = 1;   // attend_split: query heads a workgroup at most (split_heads())
  uint32_t split_tile = 32;   // attend_split: keys a tile up to d 256 (split_small_tile())
  bool fuse_prep = true;      // prep_attend: qkv_prep folded into attend_split (INFER_ATTN_PREP)
  uint32_t max_shared_bytes = 0;  // the device's limit a workgroup
  std::unique_ptr<Pipeline> commit;
  std::unique_ptr<Pipeline> evict_copy;
  Buffer scratch;
  Buffer scores;    // decode: f32 [max_n_q, max_positions]
  Buffer stats;     // decode: f32 [max_n_q, knobs.score_groups, 2]
  Buffer counters;  // uint per workgroup column of a merging dispatch, zero between

  // The pipeline of `key` (kernel name, KV mode, heads, head dim), created by `desc` on first
  // use. Recording happens once per shape, so the lock is never contended on the token path.
  using Key = std::tuple<std::string, uint32_t, uint32_t, uint32_t>;
  Result<const Pipeline*> cached(const Key& key, const std::function<PipelineDesc()>& desc) const;
  // A desc with the workgroup of `lanes` (LOCAL_SIZE, pinned subgroup; local_size > 0: that
  // many invocations instead, a multiple of the subgroup) and the KV mode.
  PipelineDesc desc(const char* variant, std::vector<Access> bindings, uint32_t push_bytes,
                    std::vector<SpecConstant> spec, uint32_t mode, uint32_t local_size = 0) const;

 private:
  mutable std::mutex mu_;
  mutable std::map<Key, std::unique_ptr<Pipeline>> cache_;
};

// The most keys a decode token sees (the grids of both decode paths are sized for it).
uint32_t max_decode_keys(const AttentionDims& dims, uint32_t max_positions);

// attend.comp's and attend_split.comp's push constants for dims and a grid of n_splits.
shader::AttendPush attend_push(const AttentionDims& dims, uint32_t n_splits,
                               uint32_t heads_per_group, uint32_t tokens_per_group,
                               uint32_t min_keys);

}  // namespace infer::gpu
