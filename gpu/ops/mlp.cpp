// Gate-up op: the gate-up variants of the matvec family (shaders/matvec.comp and
// shaders/matmul.comp built with GATE_UP), both matrices read in one pass.
#include "gpu/ops/mlp.h"

#include "base/check.h"
#include "gpu/context.h"

namespace infer::gpu {

struct GateUpOp::Pipelines {
  MatvecKernels k;
};

GateUpOp::~GateUpOp() = default;

Result<std::unique_ptr<GateUpOp>> GateUpOp::create(const VulkanContext& ctx, WeightFormat format,
                                                   MatvecTuning tuning) {
  std::unique_ptr<GateUpOp> op(new GateUpOp());
  op->format_ = format;
  op->p_ = std::make_unique<Pipelines>();
  INFER_TRY(op->p_->k, create_matvec_kernels(ctx, format, /*gate_up=*/true, tuning));
  return op;
}

Result<void> GateUpOp::record(Recorder& rec, const GpuMatrix& gate, const GpuMatrix& up, Binding x,
                              Binding act, uint32_t T, Binding x_int8) const {
  return record_matvec_kernels(rec, p_->k, gate, &up, x, act, T, x_int8);
}

bool GateUpOp::takes_int8_x(int64_t I, int64_t H, uint32_t T) const {
  return gpu::takes_int8_x(p_->k, I, H, T);
}

bool GateUpOp::products_in_f16(int64_t I, int64_t H, uint32_t T) const {
  return gpu::products_in_f16(p_->k, I, H, T);
}

size_t GateUpOp::scratch_bytes() const { return gpu::scratch_bytes(p_->k); }

}  // namespace infer::gpu
