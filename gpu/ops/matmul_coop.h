// The cooperative-matrix (tensor-core) prefill products of a matvec family
// (shaders/matmul_coopmat.comp), and the pass that quantizes the integer-dot products'
// activations once a product (shaders/coop_x_prep.comp), for gpu/ops/matvec.cpp.
#pragma once

#include <cstdint>

#include "base/result.h"
#include "gpu/context.h"
#include "gpu/ops/matvec.h"
#include "gpu/recorder.h"

namespace infer::gpu {

// Makes k.coop (and k.coop_small, the half tile) where the device has VK_KHR_cooperative_matrix
// and holds the tile (resolve_coop_tuning; else leaves them null).
Result<void> create_coop_kernels(const VulkanContext& ctx, WeightFormat format, bool gate_up,
                                 MatvecKernels& k);

// Makes k.coop_prep (coop_x_prep_int8) for the integer-dot products.
Result<void> create_int8_prep(const VulkanContext& ctx, MatvecKernels& k);

// Records coop_x_prep over x ([n_tokens, cols] f32) into k.coop_x (grown if need be) and returns
// the binding of the quantized activations for matvec_dot.comp.
Result<Binding> record_coop_x_prep(Recorder& rec, const MatvecKernels& k, Binding x, int64_t cols,
                                   uint32_t n_tokens);

}  // namespace infer::gpu
