// Push and specialization constants of shaders/matvec_add_norm.comp, shared with
// gpu/ops/matvec_add_norm.cpp (which static_asserts the size). C/GLSL common subset: 32-bit
// scalars only.
#ifndef INFER_SHADERS_MATVEC_ADD_NORM_H_
#define INFER_SHADERS_MATVEC_ADD_NORM_H_

#include "common/host_shared.h"

// o[t] = W · in[t] (matvec.h's fields), then the block's residual step on o (norm.h's add_norm):
// stream[t] = (stream[t] + rmsnorm(o[t]) · w_post) · scale, h[t] = rmsnorm(stream[t]) · next_w.
// With gelu_b, in[t, c] = gelu_tanh(x[t, c]) · b[t·b_stride + b_off + c] (the PLE block's gated
// input, elementwise.h's gelu_mul), else in = x. Strides in f32 elements.
INFER_PUSH_BEGIN(MatvecAddNormPush)
uint rows;      // output features = the stream's width H
uint cols;      // input features; a multiple of 32 for Q8_0/Q4_0
uint n_tokens;  // T
uint x_stride;  // elements between tokens in x (>= cols)
uint y_stride;  // elements between tokens in o and the stream (>= rows)
uint gelu_b;    // 1: the input is gelu(x) ⊙ b; 0: x
uint b_stride;  // elements between tokens in b
uint b_off;     // b's first element of token 0
float eps;      // inside the root (GEMMA4_TEXT.md §4.1)
float scale;    // the layer scalar on a layer's last block, else 1
INFER_PUSH_END(MatvecAddNormPush)

// Bindings: 0 W, 1 x, 2 o, 3 b (x again without gelu_b), 4 the stream, 5 w_post, 6 counter
// (uint, 0 between dispatches), and with FUSE_NEXT 7 next_w, 8 h.
#define INFER_MATVEC_ADD_NORM_NEXT_BINDINGS 9  // storage buffers the FUSE_NEXT variant binds

// Specialization constant ids: those of matvec.comp (matvec.h), and the epilogue's bound on
// gl_NumSubgroups (sizes its shared memory).
#define INFER_MATVEC_ADD_NORM_SPEC_LOCAL_SIZE 0
#define INFER_MATVEC_ADD_NORM_SPEC_ROWS 1
#define INFER_MATVEC_ADD_NORM_SPEC_TOKENS 2
#define INFER_MATVEC_ADD_NORM_SPEC_SUBGROUPS 3
#define INFER_MATVEC_ADD_NORM_SPEC_MAX_SUBGROUPS 4

#endif  // INFER_SHADERS_MATVEC_ADD_NORM_H_
