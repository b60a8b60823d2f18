// Internal to GpuForward: the ops, the device buffers of one chunk, and the recordings (decode
// recorded once per head kind and replayed; prefill chunks recorded per length and kept).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "gpu/buffer.h"
#include "gpu/gpu_forward.h"
#include "gpu/gpu_forward_quiescence.h"
#include "gpu/gpu_kv.h"
#include "gpu/gpu_weights.h"
#include "gpu/ops/attention.h"
#include "gpu/ops/attention_mass.h"
#include "gpu/ops/elementwise.h"
#include "gpu/ops/embed.h"
#include "gpu/ops/matvec.h"
#include "gpu/ops/mlp.h"
#include "gpu/ops/moe.h"
#include "gpu/ops/rms_norm.h"
#include "gpu/recorder.h"
#include "model/kv_ring.h"
#include "model/kv_ring_api.h"

namespace infer::gpu {

// What a recording does after the last layer.
enum class Head {
  kNone,    // an intermediate prefill chunk: no logits
  kLast,    // logits [V] of the chunk's last token, copied to logits_host
  kAll,     // logits [T, V] of every token, copied to all_logits_host
  kArgmax,  // only the argmax of the last token's logits, into id_host
};

// Every op the forward records, one object per op family (matrix ops per weight format).
struct GpuOps {
  std::unique_ptr<RmsNormOps> norm;
  std::unique_ptr<EmbedOps> embed;
  std::unique_ptr<ElementwiseOps> elementwise;
  std::unique_ptr<AttentionOps> attention;
  std::array<std::unique_ptr<MatvecOp>, 4> matvec;  // by WeightFormat, those the model uses
  // f32/bf16 products of rows of at least long_cols columns on their own ops of more subgroups
  // a workgroup (GpuTuning's long_row_cols, long_row_subgroups: 0 none made): 12B bf16's down
  // projection took 34.8 us on 8 against 36.8 on 4, while E2B bf16 lost with 8 everywhere.
  std::array<std::unique_ptr<MatvecOp>, 4> matvec_long;
  int64_t long_cols = 0;
  std::array<std::unique_ptr<GateUpOp>, 4> gate_up;
  std::unique_ptr<MoeOps> moe;
  // Products on the integer-dot kernel with prepared x take it from the add_norm before them
  // (RmsNormOps::writes_int8_h) rather than a dispatch of their own (GpuTuning::int8_from_norm).
  bool int8_from_norm = true;
  // The o projection's from the split decode attention (AttentionOps::writes_int8_out), where
  // GpuTuning's int8_from_norm and int8_from_attention are both on.
  bool int8_from_attention = true;
  const MatvecOp& matvec_for(WeightFormat f) const;
  // m's op: the long-row one where made and m's rows are long enough, else matvec_for.
  const MatvecOp& matvec_for(const GpuMatrix& m) const;
  const GateUpOp& gate_up_for(WeightFormat f) const;
};

// Device buffers of one chunk of up to C = max_chunk tokens (f32 unless said otherwise).
struct GpuActivations {
  Buffer step;        // host-written uint [INFER_STEP_(RING_)WORDS] (shaders/step.h)
  Buffer step_dev;    // KV ring only: the step copied to the device at the chunk's start
  Buffer ple_rows;    // host-written [C, L·P]: the PLE table rows of the chunk's ids (§4.3.1)
  Buffer x, h, o;     // [C, H]: stream, normed block input, block output
  Buffer x_alt;       // [C, H]: the stream before a layer's last step, where quiescence copies
                      // the stream after it (ChunkRecorder::expose_stream)
  Buffer h_int8;      // h as the integer-dot products take it: int8 [C, H], f32 scales [C, H/32]
  Buffer x2, m2;      // [C, H]: MoE expert input and output
  Buffer qkv;         // [C, rows of the widest stacked q|k|v projection]: raw projections
  Buffer q, att;      // [C, n_q·d_max]: q normed and rotated, attention output
  Buffer att_int8;    // att as the integer-dot o projection takes it (one token: int8
                      // [n_q·d_max], f32 scales [n_q·d_max / 32]), written by the attention
  Buffer act;         // [C, I_max]
  Buffer ple;         // [C, L·P]: per-layer inputs
  Buffer g;           // [C, P]: PLE gate
  Buffer moe_idx;     // uint [C, k]
  Buffer moe_w;       // [C, k]
  Buffer head_in;     // [H]: the last token's final-normed row
  Buffer logits;      // [V]
  Buffer logits_host; // host [V]
  Buffer id_host;     // host uint [1]
  Buffer all_logits, all_logits_host;  // [C, V], device and host; made on first use
  size_t bytes = 0;   // device bytes, all_logits excluded
};

// KvRows over the device caches of the KV ring's tiered layers (reads wait for the device).
class GpuKvRows final : public KvRows {
 public:
  GpuKvRows(const VulkanContext& ctx, const GpuKv& kv, std::vector<int> tiered)
      : ctx_(ctx), kv_(kv), tiered_(std::move(tiered)) {}
  std::span<const int> tiered_layers() const override { return tiered_; }
  int64_t row_floats(int layer) const override;
  void read_row(int layer, int32_t slot, float* k, float* v) const override;
  // Every layer's rows in one gather (download_gather): runs of consecutive slots are one copy.
  void read_rows(std::span<const int32_t> slots, std::span<float* const> k,
                 std::span<float* const> v) const override;
  // n rows at slots first .. first + n - 1: one K and one V transfer (each waits).
  Result<void> write_rows(int layer, int32_t first, int32_t n, const float* k,
                          const float* v) const;
  int64_t downloads() const { return downloads_; }  // transfers that waited, so far

 private:
  const VulkanContext& ctx_;
  const GpuKv& kv_;
  std::vector<int> tiered_;
  mutable int64_t downloads_ = 0;
};

// KvRows over the evicted rows a chunk's command buffer copied to host-visible staging
// (kv_evict_copy): what the sink reads after the chunk's wait, with no wait of its own. Valid
// for the slots of `evicted` only (token e's rows at staging row e).
class StagedKvRows final : public KvRows {
 public:
  StagedKvRows(const GpuKvRows& rows, const float* staging, std::span<const uint64_t> k_offsets,
               std::span<const uint64_t> v_offsets, std::span<const EvictedToken> evicted)
      : rows_(rows), staging_(staging), k_off_(k_offsets), v_off_(v_offsets), evicted_(evicted) {}
  std::span<const int> tiered_layers() const override { return rows_.tiered_layers(); }
  int64_t row_floats(int layer) const override { return rows_.row_floats(layer); }
  void read_row(int layer, int32_t slot, float* k, float* v) const override;

 private:
  const GpuKvRows& rows_;
  const float* staging_;
  std::span<const uint64_t> k_off_, v_off_;  // per tiered layer: its K / V rows' first float
  std::span<const EvictedToken> evicted_;
};

struct GpuForward::Impl {
  VulkanContext* ctx = nullptr;
  const Model* model = nullptr;
  ThreadPool* pool = nullptr;
  int64_t max_positions = 0;
  int64_t max_chunk = 0;
  std::unique_ptr<GpuWeights> weights;
  std::unique_ptr<GpuKv> kv;
  GpuOps ops;
  GpuActivations a;

  std::unique_ptr<Recorder> decode_logits;  // T = 1, Head::kLast, replayed per token
  std::unique_ptr<Recorder> decode_greedy;  // T = 1, Head::kArgmax
  struct Chunk {
    uint32_t T = 0;
    Head head = Head::kNone;
    uint64_t last_use = 0;
    std::unique_ptr<Recorder> rec;
  };
  std::vector<Chunk> chunks;  // prefill recordings, least recently used replaced
  uint64_t uses = 0;

  int64_t pos = 0;
  StepTiming timing;

  // The KV ring (null: exact mode). Planned on the host per chunk, rows on the device.
  std::unique_ptr<infer::KvRing> ring;
  std::unique_ptr<GpuKvRows> rows;
  EvictionSink* sink = nullptr;
  // Made on the first chunk run with a sink (ensure_evict_staging): host-visible staging of the
  // evicted rows, per tiered layer K [max_chunk, row] then V [max_chunk, row], that every
  // recording made since fills (kv_evict_copy before kv_commit) for the step's E victims.
  Buffer evict_staging;
  std::vector<uint64_t> evict_k_off, evict_v_off;  // floats, per tiered layer
  Result<void> ensure_evict_staging();
  // --evict mass: per-key attention mass of each chunk, read back for ring->add_mass (else
  // null, and the recordings hold no mass dispatch).
  std::unique_ptr<AttentionMassOps> mass;

  // Records the whole forward of T tokens (positions and ids from the step buffer) and `head`;
  // with quiescence on, `part` of it (gpu_forward_quiescence.h).
  Result<void> record(Recorder& rec, uint32_t T, Head head, Part part = Part::kWhole);
  // Quiescence (null: off). gpu_forward_quiescence.cpp: the probe/snapshot copies after a layer,
  // a skipped token's carried layers, and the submit that decides between the two upper parts.
  std::unique_ptr<GpuQuiet> quiet;
  void record_quiet_copies(Recorder& rec, uint32_t T, int layer);
  bool quiet_copies_after(int layer) const;  // whether record_quiet_copies copies anything there
  Result<void> record_carried(Recorder& rec);
  Result<void> quiet_submit(Recorder& rec, int64_t T);
  Result<Recorder*> quiet_recording(Head head, Part part);  // kUpper or kCarried, made once
  // One token's K/V rows of `layer` from h (q|k|v matvec, qkv_prep), as the attention block
  // computes them (gpu_forward_record.cpp).
  Result<void> record_kv_rows(Recorder& rec, int layer);
  // The prefill recording for (T, head), recorded now unless kept from an earlier chunk.
  Result<Recorder*> chunk_recording(uint32_t T, Head head);
  // Writes step and PLE rows for ids at pos, runs `rec` and waits; fills timing (host time
  // counted from t0).
  Result<void> run(Recorder& rec, const int32_t* ids, int64_t T,
                   std::chrono::steady_clock::time_point t0);
  Result<void> check_ids(const int32_t* ids, int64_t n) const;
  Result<void> ensure_all_logits();
};

// Allocates the chunk buffers (gpu_forward_setup.cpp); ring_keys: A + W + R with the KV ring,
// else 0.
Result<void> create_activations(const VulkanContext& ctx, const ModelConfig& cfg,
                                int64_t max_chunk, int64_t ring_keys, GpuActivations& a);
// The mass op of a ring under --evict mass (gpu_forward_ring.cpp): limits from the model, the
// chunk and the ring's A + W + R keys.
Result<std::unique_ptr<AttentionMassOps>> create_mass_ops(const VulkanContext& ctx,
                                                          const ModelConfig& cfg,
                                                          int64_t max_chunk, int64_t ring_keys);
// Models at least this wide take integer dots on their Q8_0/Q4_0 decode products where
// GpuTuning::int_dot is auto (12B's 3840 gains, E2B's 1536 loses; E4B's 2560 is unmeasured and
// stays in f32).
constexpr int64_t kIntDotMinHidden = 3072;
// Whether the forward's Q8_0/Q4_0 decode products take integer dots: int_dot, auto resolved from
// the device and the model's hidden size.
bool resolved_int_dot(const GpuTuning& t, const DeviceInfo& info, int64_t hidden_size);

// Creates the ops the model needs (gpu_forward_setup.cpp).
Result<void> create_ops(const VulkanContext& ctx, const ModelConfig& cfg, const ModelWeights& w,
                        int64_t max_positions, int64_t max_chunk, GpuOps& ops);

}  // namespace infer::gpu
