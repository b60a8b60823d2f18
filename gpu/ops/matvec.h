// Matrix-vector and small-T matrix-matrix products on the GPU (shaders/matvec.comp):
// y[t, :] = W · x[t, :] with W [rows, cols] in F32/BF16/Q8_0/Q4_0, x and y f32.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/result.h"
#include "gpu/buffer.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"
#include "model/matrix.h"

namespace infer::gpu {

class VulkanContext;

// A weight matrix in a device buffer, bytes exactly as in model/matrix.h.
struct GpuMatrix {
  WeightFormat format = WeightFormat::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  Buffer buffer;
};

Result<GpuMatrix> upload_matrix(const VulkanContext& ctx, const Matrix& m, std::string name);

// Workgroup shape; zeros are chosen from the device (MatvecOp::create says how).
struct MatvecTuning {
  uint32_t subgroups_per_group = 0;  // workgroup = subgroup size * this
  uint32_t rows_per_group = 0;
  uint32_t tokens_per_group = 0;  // for T > 1; T = 1 uses a one-token pipeline
};

class MatvecOp {
 public:
  static Result<std::unique_ptr<MatvecOp>> create(const VulkanContext& ctx, WeightFormat format,
                                                  MatvecTuning tuning = {});

  // Records y[t, r] = sum_c W[r, c] * x[t, c] for t < n_tokens.
  // w: [rows, cols] in this op's format; x: [n_tokens, cols] f32; y: [n_tokens, rows] f32.
  Result<void> record(Recorder& rec, const GpuMatrix& w, Binding x, Binding y,
                      uint32_t n_tokens) const;

  WeightFormat format() const { return format_; }
  const MatvecTuning& tuning() const { return tuning_; }  // as resolved for the device

 private:
  MatvecOp() = default;

  const VulkanContext* ctx_ = nullptr;
  WeightFormat format_ = WeightFormat::kF32;
  MatvecTuning tuning_;
  std::unique_ptr<Pipeline> one_token_;
  std::unique_ptr<Pipeline> many_tokens_;
};

// y = W · x for n_tokens rows of x, end to end: uploads x, records, submits, downloads y.
// x: [n_tokens, w.cols] f32, y: [n_tokens, w.rows] f32 (host memory).
Result<void> run_matvec(const VulkanContext& ctx, const MatvecOp& op, const GpuMatrix& w,
                        const float* x, int64_t n_tokens, float* y);

}  // namespace infer::gpu
