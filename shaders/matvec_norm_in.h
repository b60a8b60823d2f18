// Push and specialization constants of shaders/matvec_norm_in.comp, shared with
// gpu/ops/matvec_norm_in.cpp (which static_asserts the size). C/GLSL common subset: 32-bit
// scalars only.
#ifndef INFER_SHADERS_MATVEC_NORM_IN_H_
#define INFER_SHADERS_MATVEC_NORM_IN_H_

#include "common/host_shared.h"

// y = W · in (matvec.h's fields first: matvec_rows.glsl reads them), one token, where every
// workgroup first stages `in` [cols] in shared memory from the stream (GEMMA4_TEXT.md §4.4):
//   INFER_NORM_IN_ADD:  s = (x + rmsnorm(o) · w_post) · scale, the pending residual step; the
//                       first workgroup writes s to x_out. Without it s = x.
//   INFER_NORM_IN_NORM: in = rmsnorm(s) · norm_w, the next block's input norm. Without it in = s.
//   INFER_NORM_IN_GELU: in[c] = gelu_tanh(x[c]) · b[b_off + c] (the PLE block's gated input,
//                       §4.9); alone.
INFER_PUSH_BEGIN(MatvecNormInPush)
uint rows;      // output features (rows of W)
uint cols;      // input features: H, or P with INFER_NORM_IN_GELU
uint n_tokens;  // 1
uint x_stride;  // unused (one token), kept for matvec_rows.glsl's MatvecPush layout
uint y_stride;  // elements between tokens in y (>= rows)
uint flags;     // INFER_NORM_IN_* bits
uint b_off;     // INFER_NORM_IN_GELU: b's first element
float eps;      // inside the root (§4.1)
float scale;    // INFER_NORM_IN_ADD: the layer scalar on a layer's last block, else 1
INFER_PUSH_END(MatvecNormInPush)

#define INFER_NORM_IN_ADD 1u
#define INFER_NORM_IN_NORM 2u
#define INFER_NORM_IN_GELU 4u
// Set by the host where cols % 4 == 0 and x, o, w_post, norm_w and x_out start 16-byte aligned:
// the prologue loads and stores whole quads.
#define INFER_NORM_IN_VEC4 8u

// Bindings: 0 W (the gate with GATE_UP), 1 x [cols] (the stream, or g), 2 y, 3 o, 4 w_post,
// 5 norm_w, 6 x_out (written by workgroup 0 with INFER_NORM_IN_ADD), 7 b, and with GATE_UP 8 the
// up matrix. A binding its flags leave unread may be any buffer.
#define INFER_NORM_IN_BINDING_UP 8
#define INFER_NORM_IN_BINDINGS 8          // plain product
#define INFER_NORM_IN_GATE_UP_BINDINGS 9  // gate-up

// Specialization constant ids, chosen per device at pipeline creation.
#define INFER_NORM_IN_SPEC_LOCAL_SIZE 0  // invocations = subgroup size · SUBGROUPS
#define INFER_NORM_IN_SPEC_ROWS 1        // rows of W per subgroup slot
#define INFER_NORM_IN_SPEC_SUBGROUPS 2   // subgroups a workgroup has at the pinned size
#define INFER_NORM_IN_SPEC_MAX_SUBGROUPS 3  // bound of gl_NumSubgroups (the reduction's partials)
#define INFER_NORM_IN_SPEC_QUADS 4       // capacity of the staged input, in quads of 4 floats
#define INFER_NORM_IN_SPEC_SLOTS 5       // subgroup slots a subgroup takes: a workgroup owns
                                         // SUBGROUPS · SLOTS · ROWS rows
#define INFER_NORM_IN_SPEC_PREFETCH 6    // 1: the product's first round of weights issued
                                         // before the prologue (matvec_rows.glsl)

#endif  // INFER_SHADERS_MATVEC_NORM_IN_H_
