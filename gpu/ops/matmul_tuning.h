// The tiled prefill kernel's shape (shaders/matmul.comp): its defaults, the INFER_MM_* knobs and
// the checks against the device's limits, for create_matvec_kernels (gpu/ops/matvec.cpp).
#ifndef INFER_GPU_OPS_MATMUL_TUNING_H_
#define INFER_GPU_OPS_MATMUL_TUNING_H_

#include <cstdint>

#include "base/result.h"
#include "gpu/context.h"
#include "gpu/ops/matvec.h"

namespace infer::gpu {

struct TileShape {
  uint32_t rows, tokens, thread_rows, thread_tokens, stages;
};

// The quarter tile of t (a short grid of big tiles takes it; matmul_tuning.cpp says how).
TileShape small_tile(const MatvecTuning& t);

// Fills the tiled kernel's zeros in t from the environment, then from the defaults, and checks
// the shape against the device.
Result<void> resolve_matmul_tuning(const VulkanContext& ctx, bool gate_up, MatvecTuning& t);

// The cooperative-matrix kernel's subgroups a workgroup: each sums coop_sg_rows (of each matrix,
// with gate-up) x coop_sg_tokens.
uint32_t coop_subgroups(const MatvecTuning& t);

// Fills the cooperative-matrix kernel's zeros in t (coop_*) the same way; false where the device
// cannot hold the tile (it then takes the tiled kernel), an error for a knob it cannot run.
Result<bool> resolve_coop_tuning(const VulkanContext& ctx, WeightFormat format, bool gate_up,
                                 MatvecTuning& t);

}  // namespace infer::gpu

#endif  // INFER_GPU_OPS_MATMUL_TUNING_H_
