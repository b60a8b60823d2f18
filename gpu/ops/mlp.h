// The fused gated-GELU MLP front half on the GPU (GEMMA4_TEXT.md §4.8): both projections of x in
// one pass over the weights, act[t, i] = gelu_tanh(gate[i] · x[t]) · (up[i] · x[t]). The down
// projection is a MatvecOp. For T above a threshold the op switches to a tiled matrix-matrix
// kernel (prefill).
#pragma once

#include <cstdint>
#include <memory>

#include "base/result.h"
#include "gpu/buffer.h"
#include "gpu/ops/matvec.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"

namespace infer::gpu {

class VulkanContext;

class GateUpOp {
 public:
  static Result<std::unique_ptr<GateUpOp>> create(const VulkanContext& ctx, WeightFormat format,
                                                  MatvecTuning tuning = {});
  ~GateUpOp();

  // gate, up: [I, H] in this op's format; x: [T, H] f32; act: [T, I] f32.
  // x_int8: as MatvecOp::record's (where takes_int8_x).
  Result<void> record(Recorder& rec, const GpuMatrix& gate, const GpuMatrix& up, Binding x,
                      Binding act, uint32_t T, Binding x_int8 = {}) const;
  bool takes_int8_x(int64_t I, int64_t H, uint32_t T) const;
  // As MatvecOp::products_in_f16 and scratch_bytes.
  bool products_in_f16(int64_t I, int64_t H, uint32_t T) const;
  size_t scratch_bytes() const;

 private:
  GateUpOp() = default;
  struct Pipelines;
  std::unique_ptr<Pipelines> p_;
  WeightFormat format_ = WeightFormat::kF32;
};

}  // namespace infer::gpu
