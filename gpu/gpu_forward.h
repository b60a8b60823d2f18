// The Vulkan forward pass (DESIGN.md §7, GEMMA4_TEXT.md §4-§5): weights uploaded once, the KV
// rings on the device, a decode step recorded once and replayed per token (the step buffer
// carries the token and its position), prefill recorded per chunk with matrix-matrix kernels.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "model/forward.h"
#include "model/kv_ring_api.h"
#include "model/model.h"

namespace infer {
class ThreadPool;
struct QuiescenceConfig;
struct QuiescenceStats;
}

namespace infer::gpu {

class VulkanContext;

// The prefill chunk (tokens) for ctx: its tuning's prefill_chunk (gpu/tuning.h), 512 on a GPU of
// 64 or more compute cores by default, 256 elsewhere.
int64_t default_prefill_chunk(const VulkanContext& ctx);

// The tuning the forward runs with, every field (gpu/tuning.h), int_dot's auto resolved for the
// model: the bench JSON's gpu_tuning.
std::vector<std::pair<std::string, std::string>> effective_tuning(const VulkanContext& ctx,
                                                                  const ModelConfig& cfg);

// What one recording holds: each dispatch waits on the one before it only across a pipeline
// barrier, so barrier commands count the dependent steps of a token.
struct RecordingCounts {
  int dispatches = 0;
  int barrier_commands = 0;  // vkCmdPipelineBarrier2 calls
  int buffer_barriers = 0;   // buffer memory barriers in them
};

// Where the time of the last decode step went (the host waits once per token).
struct StepTiming {
  double host_s = 0;    // host work before submit: step buffer, PLE rows
  double submit_s = 0;  // vkQueueSubmit
  double wait_s = 0;    // fence wait (GPU time, mostly)
};

// One command of a profiled recording: its pipeline (or "copy") and the GPU time since the
// command before it ended, barrier waits included.
struct CommandTime {
  std::string label;
  double us = 0;
};

class GpuForward final : public Forward, public KvRingAccess {
 public:
  // Uploads the model's bound weights (quantized as loaded); `pool` gathers PLE rows.
  static Result<std::unique_ptr<GpuForward>> create(VulkanContext& ctx, const Model& model,
                                                    ThreadPool& pool, int64_t max_positions,
                                                    int64_t max_chunk = 256);
  // The KV ring (DESIGN.md §4, docs/KV_RING.md), as CpuForward's ring constructor: the same
  // KvRing bookkeeping on the host (plan, sink, commit per chunk), rows on the device; an endless
  // stream in buffers fixed here; chunks of at most ring.max_chunk(). kMass eviction reads each
  // chunk's per-key attention mass back for the host's bookkeeping (create_mass_ops).
  static Result<std::unique_ptr<GpuForward>> create(VulkanContext& ctx, const Model& model,
                                                    ThreadPool& pool, const RingConfig& ring,
                                                    int64_t max_chunk = 256);
  ~GpuForward() override;

  // Chunks of up to max_chunk tokens, each a recording kept per (length, logits wanted) and
  // replayed. logits == nullptr: none are computed.
  Result<void> prefill(std::span<const int32_t> ids, float* logits,
                       bool all_logits = false) override;
  // Replays the decode recording made at create; the host waits once. logits == nullptr: none
  // are copied back.
  Result<void> decode(int32_t id, float* logits) override;
  // Decode with the argmax taken on the GPU: only the id comes back.
  Result<int32_t> decode_greedy(int32_t id);
  void reset() override;
  int64_t position() const override;
  int64_t vocab_size() const override;
  int64_t max_chunk() const;

  // Of the last decode step or prefill chunk.
  const StepTiming& last_step_timing() const;
  size_t device_bytes() const;  // weights, caches, activations and prefill scratch on the device
  // The decode recording decode_greedy replays, as recorded at create.
  RecordingCounts decode_counts() const;
  // Feeds ids (one chunk: at most max_chunk) through a recording made now with a GPU timestamp
  // after every command, and returns each command's time. One token records what
  // decode_greedy replays; more, a prefill chunk with the last token's logits. For --profile.
  Result<std::vector<CommandTime>> profile(std::span<const int32_t> ids);

  // The state after n tokens for benchmarks (as CpuForward::synthesize_context): every KV row set
  // to one small synthetic value (attention's cost depends on the keys' count, not their values),
  // the ring's bookkeeping as after n FIFO tokens, the position n.
  // gpu_forward_synthetic_context.cpp.
  Result<void> synthesize_context(int64_t n);

  // Quiescence (DESIGN.md §6, docs/QUIESCENCE.md), as CpuForward::set_quiescence: the same
  // decisions, the same carried layers. nullptr turns it off. gpu_forward_quiescence.cpp.
  Result<void> set_quiescence(const QuiescenceConfig* cfg);
  const QuiescenceStats* quiescence_stats() const;  // nullptr when off

  KvRingAccess* kv_ring() override;  // this in ring mode, else nullptr
  // KvRingAccess (ring mode only). The sink is called after the chunk's own wait, its rows read
  // from a host-visible staging buffer that the chunk's command buffer filled before overwriting
  // the victims' slots (no wait of their own; made and recorded on the first chunk with a sink).
  // read_kv and set_recall read from / write to the device (each row waits).
  const infer::KvRing& ring() const override;
  void set_eviction_sink(EvictionSink* sink) override;
  Result<void> set_recall(const KvBlock& block) override;
  Result<void> read_kv(int64_t pos, int64_t n, KvBlock* out) const override;
  // Rows downloaded from the device with a wait of their own (read_kv), since create: for tests.
  int64_t kv_row_downloads() const;

 private:
  GpuForward();
  static Result<std::unique_ptr<GpuForward>> make(VulkanContext& ctx, const Model& model,
                                                  ThreadPool& pool, int64_t max_positions,
                                                  int64_t max_chunk, const RingConfig* ring);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace infer::gpu
