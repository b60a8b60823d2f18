// Decode's products that start a block, with the step before them in their prologue
// (shaders/matvec_norm_in.comp): the previous block's residual step and this block's input norm
// (GEMMA4_TEXT.md §4.4), or the PLE block's gated input (§4.9), computed by every workgroup from
// a few KB in the cache. Each saves a dispatch and its barrier (add_norm, rms_norm or gelu_mul):
// decode on a big GPU is bound by the ~5 us each one costs, not by their work.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>

#include "base/result.h"
#include "gpu/buffer.h"
#include "gpu/ops/matvec.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"

namespace infer::gpu {

class VulkanContext;

// What the product reads, for one token (all [cols] f32):
//   s = (x + rmsnorm(o) · w_post) · scale given o (written to x_out), else s = x;
//   in = rmsnorm(s) · norm_w given norm_w, else s;
//   or, given gelu_b, in[c] = gelu_tanh(x[c]) · gelu_b[b_off + c] (no o, no norm_w).
struct NormIn {
  Binding x;
  Binding o;
  Binding w_post;
  float scale = 1.0f;
  Binding x_out;  // another buffer than x: every workgroup reads x while the first writes x_out
  Binding norm_w;
  Binding gelu_b;
  uint32_t b_off = 0;
  float eps = 0.0f;
};

// Workgroup shape; zeros come from the device or the environment variable named (read at
// create(); matvec_norm_in.cpp argues the defaults).
struct NormInTuning {
  uint32_t subgroups = 0;          // a workgroup's (INFER_NORM_IN_SUBGROUPS; ~128 invocations,
                                   // or one per 16 columns of max_cols where that is more)
  uint32_t rows_per_subgroup = 0;  // rows a subgroup slot sums, as matvec.comp's
  uint32_t max_groups = 0;         // grids up to this many workgroups (INFER_NORM_IN_GROUPS, 512)
  uint32_t max_slots = 0;          // slots a subgroup takes at most to stay within it
                                   // (INFER_NORM_IN_SLOTS, 8)
  // Each subgroup's first round of weights issued before the prologue, in flight while it stages
  // the input (INFER_NORM_IN_PREFETCH=1; off by default until measured).
  bool prefetch = false;
};

class MatvecNormInOp {
 public:
  // The op for products of `format` (gate_up: the MLP's gate-up pair) whose inputs have at most
  // max_cols columns. Null, not an error, where the device binds too few storage buffers a stage
  // or has too little shared memory for max_cols: the caller keeps the separate dispatches.
  static Result<std::unique_ptr<MatvecNormInOp>> create(const VulkanContext& ctx,
                                                        WeightFormat format, bool gate_up,
                                                        uint32_t max_cols, NormInTuning t = {});
  ~MatvecNormInOp();

  // Subgroup slots a workgroup takes for a matrix of `rows`: the fewest (a power of two up to
  // max_slots) that keep the grid within max_groups, since each workgroup pays for the prologue;
  // 0 where none does (a vocabulary head: one add_norm costs less than its prologue repeated).
  uint32_t slots_for(int64_t rows) const;
  // Whether record() takes w: this op's format, cols <= max_cols, slots_for(rows) > 0.
  bool applies(const GpuMatrix& w) const;

  // y [rows] = W · in (gate_up: gelu(W · in) ⊙ (up · in)) for one token, `in` as `ni` says.
  // w (and up): [rows, cols]; y must be none of ni's buffers. The pipeline for the matrix's
  // slots is built on its first use (a model uses one or two of them; the forward records its
  // decode at creation).
  Result<void> record(Recorder& rec, const GpuMatrix& w, const GpuMatrix* up, const NormIn& ni,
                      Binding y) const;

  const NormInTuning& tuning() const { return t_; }

 private:
  MatvecNormInOp() = default;
  Result<const Pipeline*> pipeline_for(uint32_t slots) const;

  static constexpr size_t kMaxSlotsLog2 = 16;
  const VulkanContext* ctx_ = nullptr;
  WeightFormat format_ = WeightFormat::kF32;
  bool gate_up_ = false;
  uint32_t max_cols_ = 0;
  uint32_t max_workgroups_x_ = 0;
  NormInTuning t_;
  PipelineDesc desc_;  // all but the slots
  mutable std::mutex mutex_;
  mutable std::array<std::unique_ptr<Pipeline>, kMaxSlotsLog2 + 1> pipelines_;  // by log2(slots)
};

}  // namespace infer::gpu
