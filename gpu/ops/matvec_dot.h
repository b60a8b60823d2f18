// The integer-dot-product matvec kernels (shaders/matvec_dot.comp), made for gpu/ops/matvec.cpp.
#pragma once

#include <vector>

#include "base/result.h"
#include "gpu/context.h"
#include "gpu/ops/matvec.h"
#include "gpu/pipeline.h"

namespace infer::gpu {

// Makes k's dot_* pipelines for k.format and k.gate_up (whose integer dots are wanted), and
// records the shape they take in k.tuning: the dot workgroup (tuning's, else INFER_DOT_SUBGROUPS
// and INFER_DOT_ROWS, else the defaults), the input (DotInput: kAuto from INFER_INTDOT) and,
// prepared, the x8 prep pipeline and gate-up's X8_OUT variant. bindings: the plain kernels'.
Result<void> create_dot_kernels(const VulkanContext& ctx, const VkPhysicalDeviceProperties& props,
                                const std::vector<Access>& bindings, MatvecTuning tuning,
                                MatvecKernels& k);

}  // namespace infer::gpu
