// Push and specialization constants of shaders/matvec.comp, shared by the shader and
// gpu/ops/matvec.cpp (which static_asserts the size). C/GLSL common subset: 32-bit scalars only.
#ifndef INFER_SHADERS_MATVEC_H_
#define INFER_SHADERS_MATVEC_H_

#include "common/host_shared.h"

// y[t, r] = sum_c W[r, c] * x[t, c] for r < rows, t < n_tokens. Strides are in f32 elements.
INFER_PUSH_BEGIN(MatvecPush)
uint rows;      // output features (rows of W)
uint cols;      // input features (cols of W); a multiple of 32 for Q8_0/Q4_0
uint n_tokens;  // T
uint x_stride;  // elements between tokens in x (>= cols)
uint y_stride;  // elements between tokens in y (>= rows)
INFER_PUSH_END(MatvecPush)

// Specialization constant ids, chosen per device at pipeline creation (gpu/ops/matvec.cpp).
#define INFER_MATVEC_SPEC_LOCAL_SIZE 0     // invocations per workgroup = subgroup size * k
#define INFER_MATVEC_SPEC_ROWS 1           // rows of W per workgroup
#define INFER_MATVEC_SPEC_TOKENS 2         // tokens per workgroup (1 = matrix-vector)
#define INFER_MATVEC_SPEC_MAX_SUBGROUPS 3  // upper bound of gl_NumSubgroups (sizes shared memory)

#endif  // INFER_SHADERS_MATVEC_H_
