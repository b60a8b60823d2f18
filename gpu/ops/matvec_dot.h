// The integer-dot-product matvec kernels (shaders/matvec_dot.comp), made for gpu/ops/matvec.cpp.
#pragma once

#include <vector>

#include "base/result.h"
#include "gpu/context.h"
#include "gpu/ops/matvec.h"
#include "gpu/pipeline.h"

namespace infer::gpu {

// Makes k's dot_* pipelines for k.format and k.gate_up (whose integer dots are wanted) and the
// x_int8 prep pipeline they read, and records the shape they take in k.tuning: the dot workgroup
// (tuning's, else the defaults). bindings: the plain kernels'.
Result<void> create_dot_kernels(const VulkanContext& ctx, const std::vector<Access>& bindings,
                                MatvecTuning tuning, MatvecKernels& k);

}  // namespace infer::gpu
