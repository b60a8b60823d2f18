// Attention on the GPU (GEMMA4_TEXT.md §4.5-§4.7, §5): q/k/v norms, RoPE and the cache write in
// one op, then causal / sliding-window attention over the cache. Positions come from the step
// buffer (shaders/step.h), so one recording serves every decode step.
//
// The KV cache of a layer that computes K/V is a ring of `slots` rows [slots, n_kv, d] f32, K and
// V in separate buffers; position p lives in slot p % slots. The forward pass sizes the ring so
// that every key a query of the chunk needs is still there after the whole chunk is written:
// sliding layers slots >= W - 1 + max_chunk, full layers slots >= max_positions. KV-shared
// layers bind their donor's ring (written earlier in the same forward, §5).
#pragma once

#include <cstdint>
#include <memory>

#include "base/result.h"
#include "gpu/buffer.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"

namespace infer::gpu {

class VulkanContext;
struct DeviceInfo;

// The workgroup shape of the attention kernels (attend*, attend_mass): local_size invocations, a
// whole number of subgroups, enough for coalesced rows of d = 256/512 on 32- and 64-wide GPUs.
// Their lanes stride over d by the subgroup size, so it is pinned where the device lets us (Vulkan
// 1.3 subgroupSizeControl + computeFullSubgroups); unpinned, the driver picks a size in
// [smallest, largest].
struct AttentionLanes {
  uint32_t local_size = 0;
  bool pin = false;
  uint32_t smallest = 0;  // the subgroup size the most subgroups per workgroup come from
  uint32_t largest = 0;   // the one the fewest come from
  uint32_t subgroup = 0;  // the device's preferred size (the pinned one when pin)
};
AttentionLanes attention_lanes(const DeviceInfo& info);

// Token t's raw projections are one row of qkv [T, stride] f32 (the stacked q|k|v matvec output,
// gpu/gpu_weights.h): q heads [n_q, d] at 0, K heads [n_kv, d] at k_offset, V heads at v_offset
// (== k_offset on K=V layers: V is the raw k projection, §4.5).
struct QkvShape {
  uint32_t T = 1;      // tokens in the chunk
  uint32_t n_q = 0;    // query heads
  uint32_t n_kv = 0;   // KV heads; 0: a KV-shared layer, q only
  uint32_t d = 0;      // head dim
  uint32_t slots = 0;  // ring rows of the layer's cache
  float eps = 1e-6f;
  uint32_t stride = 0;    // floats per token row of qkv
  uint32_t k_offset = 0;  // floats into a token row
  uint32_t v_offset = 0;
  uint32_t mode = 0;  // INFER_KV_* (shaders/attention.h): the KV ring's layers store K unrotated
};

struct AttentionDims {
  uint32_t T = 1;       // queries in the chunk (positions step[POS0] ..)
  uint32_t n_q = 0;     // query heads; head h reads KV head h / (n_q / n_kv)
  uint32_t n_kv = 0;    // KV heads of the cache read
  uint32_t d = 0;       // head dim
  uint32_t slots = 0;   // ring rows of the cache read
  uint32_t window = 0;  // W on sliding layers (key s allowed iff p - W < s <= p); 0: full
  // INFER_KV_* (shaders/attention.h, common/kv_ring.glsl). The KV ring's modes use cache
  // positions from the step buffer and rotate keys on load; tiered caches hold slots + T rows
  // (the chunk's own in staging rows slots + t).
  uint32_t mode = 0;
};

class AttentionOps {
 public:
  // Largest shapes the op will record: sizes its own scratch (split-K partials), allocated here
  // once; attend() records may reuse it layer after layer (the recorder orders the reuse).
  // Pipelines are made on first use, one per KV mode (a specialization constant, so the exact
  // mode's kernels carry no ring addressing) and, for the decode passes, per head count and d.
  struct Limits {
    uint32_t max_T = 1;
    uint32_t max_n_q = 0;
    uint32_t max_d = 0;
    uint32_t max_positions = 0;
  };
  static Result<std::unique_ptr<AttentionOps>> create(const VulkanContext& ctx,
                                                      const Limits& limits);
  ~AttentionOps();

  // One dispatch, for t < T at position p = step[POS0] + t (§4.5, §4.6):
  //   q_out[t, h] = rope(rmsnorm(q[t, h]) · q_norm)                    h < n_q
  // and when n_kv > 0 (the layer computes K/V):
  //   k_cache[p % slots, h] = rope(rmsnorm(k[t, h]) · k_norm)          h < n_kv
  //   v_cache[p % slots, h] = rmsnorm(v[t, h])  (no weight)
  // q, k, v read from qkv as QkvShape says (left as they were). inv_freq: f32 [d/2]
  // (model/config.h rope_inv_freq; proportional RoPE has zero tails); q_out: [T, n_q·d] f32.
  // With n_kv = 0, k_norm, k_cache and v_cache may be empty (nothing is written there).
  Result<void> qkv_prep(Recorder& rec, Binding step, const QkvShape& shape, Binding qkv,
                        Binding q_norm, Binding k_norm, Binding inv_freq, Binding q_out,
                        Binding k_cache, Binding v_cache) const;

  // out[t, h] = softmax_s(q[t, h] · k_s) · v_s over the keys s the query at p may see, scores
  // unscaled (scale 1.0, §4.7), fp32 softmax. q, out: [T, n_q·d] f32. Decode (T = 1) in two
  // dispatches (scores, then softmax · V) above d 256, in one up to it (split over keys and
  // merged by the last split: attention_split.cpp); the context's tuning attn_split=on / off
  // (read at create): one dispatch for every d / for none.
  // Prefill: one dispatch of split-K flash attention merged by its last split,
  // register-blocked (attend_tiled.comp); attn_prefill=old in the context's tuning (read at
  // create): the subgroup kernel (attend.comp), which also takes head dims the tiled one does
  // not (tiled_prefill()). inv_freq [d/2]: the keys' RoPE, needed in the ring modes only.
  Result<void> attend(Recorder& rec, Binding step, const AttentionDims& dims, Binding q,
                      Binding k_cache, Binding v_cache, Binding out, Binding inv_freq = {}) const;

  // qkv_prep, then attend, for T >= 1. Decode on the split kernel takes one dispatch
  // (fused_prep(); INFER_ATTN_PREP=0 in the environment at create: always the two): every
  // workgroup norms and rotates its own query heads from qkv, and the split holding the token's
  // own key norms (in the exact mode also rotates) the token's K and V, writes them to the ring
  // as qkv_prep does and attends to them without reading them back (shaders/
  // attend_split_prep.glsl). q_out is written either way. qs and dims describe one layer;
  // k_cache and v_cache are the ring attended (qs.n_kv = 0: a KV-shared layer, its donor's
  // ring, where nothing is written). inv_freq is needed in every mode.
  Result<void> prep_attend(Recorder& rec, Binding step, const QkvShape& qs,
                           const AttentionDims& dims, Binding qkv, Binding q_norm, Binding k_norm,
                           Binding inv_freq, Binding q_out, Binding k_cache, Binding v_cache,
                           Binding out, Binding out_int8 = {}) const;
  // Whether prep_attend records one dispatch for dims.
  bool fused_prep(const AttentionDims& dims) const;
  // Whether prep_attend takes out_int8 for dims (one token, fused, d % 32 == 0): out also
  // quantized as the integer-dot products take x (record_matvec_kernels' x_int8; n_q · d columns).
  bool writes_int8_out(const AttentionDims& dims) const;

  // KV ring, tiered layers: moves the chunk's T rows (row = n_kv · d floats) from the staging
  // slots slots + t to the step buffer's write slots, once nothing reads the old rows.
  Result<void> kv_commit(Recorder& rec, Binding step, uint32_t T, uint32_t row, uint32_t slots,
                         Binding k_cache, Binding v_cache) const;
  // KV ring with an eviction sink: before kv_commit, copies the K and V rows (row floats each)
  // of the E <= T slots the step buffer lists at INFER_STEP_EVICT (shaders/step.h) to staging
  // floats k_dst + e · row and v_dst + e · row. E = 0: every workgroup returns at once.
  Result<void> kv_evict_copy(Recorder& rec, Binding step, uint32_t T, uint32_t row,
                             uint32_t slots, Binding k_cache, Binding v_cache, Binding staging,
                             uint32_t k_dst, uint32_t v_dst) const;

  // Prefill (T > 1). The most key ranges attend() splits `dims` into (its grid's x,
  // fixed at record time); at run time only ranges of >= min_keys_per_split() keys are used: one
  // writes out directly, more write partials that the last of them merges. For tests and traces.
  uint32_t splits(const AttentionDims& dims) const;
  uint32_t min_keys_per_split(const AttentionDims& dims) const;
  // Whether attend() records the tiled prefill kernel for `dims` (false: T = 1, or attend.comp).
  bool tiled_prefill(const AttentionDims& dims) const;
  // Decode (T = 1): the key splits attend() records (its grid's y; 0: the two-pass decode).
  // At run time only splits of >= decode_min_keys_per_split() keys work, as above.
  uint32_t decode_splits(const AttentionDims& dims) const;
  uint32_t decode_min_keys_per_split() const;
  // Two-pass decode (decode_splits() == 0): pass 1's most key blocks and their keys (a block
  // takes a multiple of the latter), pass 2's most key ranges and their fewest keys; the
  // blocks and ranges used at run time follow from the keys the token sees. For tests.
  struct DecodeGrid {
    uint32_t score_groups, score_block, pv_splits, pv_min_keys;
  };
  DecodeGrid decode_grid(const AttentionDims& dims) const;

 private:
  AttentionOps() = default;
  // T > 1: attention_prefill.cpp.
  Result<void> attend_prefill(Recorder& rec, Binding step, const AttentionDims& dims, Binding q,
                              Binding k_cache, Binding v_cache, Binding out,
                              Binding inv_freq) const;
  // T = 1: two passes (attention_decode.cpp) or, opt-in, one dispatch (attention_split.cpp).
  Result<void> attend_decode(Recorder& rec, Binding step, const AttentionDims& dims, Binding q,
                             Binding k_cache, Binding v_cache, Binding out,
                             Binding inv_freq) const;
  // prep_attend's fused dispatch: the raw row in q's place and these.
  struct SplitPrep {
    QkvShape shape;
    Binding q_norm, k_norm, q_out;
    Binding out_int8;  // or none
  };
  Result<void> attend_split(Recorder& rec, Binding step, const AttentionDims& dims, Binding q,
                            Binding k_cache, Binding v_cache, Binding out, Binding inv_freq,
                            const SplitPrep* prep = nullptr) const;
  struct Pipelines;
  std::unique_ptr<Pipelines> p_;
};

}  // namespace infer::gpu
