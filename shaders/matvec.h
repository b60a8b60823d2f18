// Push and specialization constants of shaders/matvec.comp and shaders/matmul.comp, shared by
// the shaders and gpu/ops/{matvec,mlp}.cpp (which static_assert the size). C/GLSL common subset:
// 32-bit scalars only.
#ifndef INFER_SHADERS_MATVEC_H_
#define INFER_SHADERS_MATVEC_H_

#include "common/host_shared.h"

// y[t, r] = sum_c W[r, c] * x[t, c] for r < rows, t < n_tokens. Strides are in f32 elements.
// The gate-up variants (GATE_UP) read a second matrix of the same shape and write
// y[t, r] = gelu(gate[r] · x[t]) · (up[r] · x[t]).
INFER_PUSH_BEGIN(MatvecPush)
uint rows;      // output features (rows of W)
uint cols;      // input features (cols of W); a multiple of 32 for Q8_0/Q4_0
uint n_tokens;  // T
uint x_stride;  // elements between tokens in x (>= cols)
uint y_stride;  // elements between tokens in y (>= rows)
uint split;     // matvec.comp: subgroups sharing each row (divides SUBGROUPS); others ignore it
INFER_PUSH_END(MatvecPush)

// Bindings: 0 W (gate), 1 x, 2 y, and for GATE_UP 3 the up matrix (GELU_MUL: 3 the multipliers).
#define INFER_MATVEC_BINDING_UP 3

// matvec.comp specialization constant ids, chosen per device at pipeline creation.
#define INFER_MATVEC_SPEC_LOCAL_SIZE 0  // invocations per workgroup = subgroup size * SUBGROUPS
#define INFER_MATVEC_SPEC_ROWS 1        // rows of W per subgroup
#define INFER_MATVEC_SPEC_TOKENS 2      // tokens per workgroup (1 = matrix-vector)
#define INFER_MATVEC_SPEC_SUBGROUPS 3   // subgroups per workgroup at the device's subgroup size
#define INFER_MATVEC_SPEC_UNROLL 5      // matvec.comp: vectors of each row a lane loads per round

// matmul.comp (tiled, prefill) specialization constant ids. A workgroup computes a tile of
// TILE_ROWS x TILE_TOKENS outputs, each invocation THREAD_ROWS x THREAD_TOKENS of them (multiples
// of 4: vec4 reads), so LOCAL_SIZE = (TILE_ROWS / THREAD_ROWS) * (TILE_TOKENS / THREAD_TOKENS).
#define INFER_MATMUL_SPEC_LOCAL_SIZE 0
#define INFER_MATMUL_SPEC_TILE_ROWS 1
#define INFER_MATMUL_SPEC_TILE_TOKENS 2
#define INFER_MATMUL_SPEC_THREAD_ROWS 3
#define INFER_MATMUL_SPEC_THREAD_TOKENS 4
// Shared-memory buffers of the tiles: 1 (the next step's loads wait in registers while the FMAs
// run, stored after a barrier) or 2 (stored right after the FMAs into the other buffer).
#define INFER_MATMUL_SPEC_STAGES 5
// Columns of W and x per shared-memory step: a multiple of 32, so quantized blocks never
// straddle two steps.
#define INFER_MATMUL_TILE_COLS 32
// matmul_coopmat.comp (VK_KHR_cooperative_matrix, 16x16x16 f16 fragments): a workgroup computes
// ROWS x TOKENS outputs (MatvecTuning::coop_rows/coop_tokens), each subgroup SG_ROWS x SG_TOKENS
// (multiples of 16): LOCAL_SIZE = (ROWS / SG_ROWS) x (TOKENS / SG_TOKENS) subgroups of the pinned
// size. Columns a step (two GGML blocks) and the f16 padding of each shared row (16-byte aligned
// rows that start on different banks): the kernel's tiles and the host's shared-memory check.
#define INFER_MATMUL_COOP_COLS 64
#define INFER_MATMUL_COOP_PAD 8
#define INFER_MATMUL_COOP_SPEC_ROWS 2
#define INFER_MATMUL_COOP_SPEC_TOKENS 3
#define INFER_MATMUL_COOP_SPEC_SG_ROWS 6
#define INFER_MATMUL_COOP_SPEC_SG_TOKENS 7
// coop_x_prep.comp: activations quantized once a product to Q8_0 blocks for the integer-dot
// products (matvec_dot.comp); LOCAL_SIZE its workgroup.
#define INFER_COOP_PREP_SPEC_LOCAL_SIZE 0

#endif  // INFER_SHADERS_MATVEC_H_
