// Push and specialization constants of the RMSNorm family (rms_norm.comp, add_norm.comp,
// norm_sum.comp), shared with gpu/ops/rms_norm.cpp (which static_asserts the size). C/GLSL common
// subset: 32-bit scalars only.
#ifndef INFER_SHADERS_NORM_H_
#define INFER_SHADERS_NORM_H_

#include "common/host_shared.h"

// One workgroup per row of n floats; rows past the device's x limit wrap into y.
INFER_PUSH_BEGIN(NormPush)
uint rows;    // rows to normalise (T for add_norm and norm_sum)
uint n;       // floats per row (H, d or P)
float eps;    // inside the root (GEMMA4_TEXT.md §4.1)
float scale;  // add_norm: the layer scalar (1 but on a layer's last block); unused elsewhere
INFER_PUSH_END(NormPush)

// Specialization constant ids, chosen per device at pipeline creation (gpu/ops/norm.cpp).
#define INFER_NORM_SPEC_LOCAL_SIZE 0     // invocations per workgroup = subgroup size * k
#define INFER_NORM_SPEC_MAX_SUBGROUPS 1  // upper bound of gl_NumSubgroups (sizes shared memory)
#define INFER_NORM_SPEC_PER_INVOCATION 2  // add_norm.comp: elements an invocation holds

#endif  // INFER_SHADERS_NORM_H_
