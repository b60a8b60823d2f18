// Push and specialization constants of the MoE shaders (moe_router, moe_topk, moe_gate_up,
// moe_down), shared with gpu/ops/moe.cpp (which static_asserts the size). C/GLSL common subset:
// 32-bit scalars only.
#ifndef INFER_SHADERS_MOE_H_
#define INFER_SHADERS_MOE_H_

#include "common/host_shared.h"

INFER_PUSH_BEGIN(MoePush)
uint T;            // tokens
uint k;            // experts per token
uint E;            // experts
uint rows;         // output rows of the matrix read (router: E, gate-up: I per half, down: H)
uint cols;         // its input features (router, gate-up: H; down: I)
float eps;         // RMSNorm ε of the router's input norm
float inv_sqrt_h;  // H^(-1/2), rounded to f32 as the CPU reference does
INFER_PUSH_END(MoePush)

// Specialization constant ids, chosen per device in gpu/ops/moe.cpp.
#define INFER_MOE_SPEC_LOCAL_SIZE 0     // invocations per workgroup
#define INFER_MOE_SPEC_ROWS 1           // output rows per workgroup (matrix kernels)
#define INFER_MOE_SPEC_MAX_SUBGROUPS 2  // upper bound of gl_NumSubgroups (sizes shared memory)
#define INFER_MOE_SPEC_MAX_K 3          // upper bound of k (moe_topk's arrays)

#endif  // INFER_SHADERS_MOE_H_
