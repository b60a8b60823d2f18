// The cooperative-matrix (tensor-core) prefill products of a matvec family
// (shaders/matmul_coop.comp) and the pass that prepares their activations once a product
// (shaders/coop_x_prep.comp), for gpu/ops/matvec.cpp.
#pragma once

#include <cstdint>

#include "base/result.h"
#include "gpu/context.h"
#include "gpu/ops/matvec.h"
#include "gpu/recorder.h"

namespace infer::gpu {

// Makes k.coop and k.coop_prep where the device holds the tile (resolve_coop_tuning; else
// leaves them null): the f16 hi + lo kernels, or with int8 (integer dots on) the _int8 variants,
// which quantize activations as the CPU's integer kernels do (k.coop_int8).
Result<void> create_coop_kernels(const VulkanContext& ctx, WeightFormat format, bool gate_up,
                                 bool int8, MatvecKernels& k);

// Makes k.coop_prep the int8 variant (coop_x_prep_int8) for the integer-dot matvecs where
// create_coop_kernels made none (a device without cooperative matrices).
Result<void> create_int8_prep(const VulkanContext& ctx, MatvecKernels& k);

// Records coop_x_prep over x ([n_tokens, cols] f32) into k.coop_x (grown if need be) and returns
// the binding of the prepared activations for matmul_coop.comp (or, int8, matvec_dot.comp).
Result<Binding> record_coop_x_prep(Recorder& rec, const MatvecKernels& k, Binding x, int64_t cols,
                                   uint32_t n_tokens);

}  // namespace infer::gpu
