// Push and specialization constants of gelu_mul.comp, softcap.comp, argmax.comp and top_k.comp,
// shared with gpu/ops/elementwise.cpp (which static_asserts the sizes). C/GLSL common subset:
// 32-bit scalars only. GLSL declares one push block per shader: each .comp defines which first
// (INFER_GELU_MUL, INFER_SOFTCAP, INFER_SELECT).
#ifndef INFER_SHADERS_ELEMENTWISE_H_
#define INFER_SHADERS_ELEMENTWISE_H_

#include "common/host_shared.h"

#if defined(__cplusplus) || defined(INFER_GELU_MUL)
// out[t·n + j] = gelu_tanh(a[t·a_stride + a_off + j]) · b[t·b_stride + b_off + j]. In floats.
INFER_PUSH_BEGIN(GeluMulPush)
uint n;
uint n_tokens;
uint a_stride;
uint a_off;
uint b_stride;
uint b_off;
INFER_PUSH_END(GeluMulPush)
#endif

#if defined(__cplusplus) || defined(INFER_SOFTCAP)
// y[i] = tanh(y[i] / cap) · cap for i < count.
INFER_PUSH_BEGIN(SoftcapPush)
uint count;
float cap;
INFER_PUSH_END(SoftcapPush)
#endif

#if defined(__cplusplus) || defined(INFER_SELECT)
// argmax and top-k, one pass of a reduction: workgroup (s, row) reduces the input entries
// [s·seg_len, min((s + 1)·seg_len, n_in)) of its row to the best k, written at
// out[(row·n_segs + s)·k ...]. The first pass reads logits (the index is the position), later
// ones the (value, index) pairs of the pass before.
INFER_PUSH_BEGIN(SelectPush)
uint n_in;          // input entries per row (V on the first pass)
uint seg_len;       // input entries a workgroup reduces
uint n_segs;        // workgroups per row
uint k;             // entries kept per workgroup (1 for argmax)
uint from_logits;   // 1: input is logits; 0: values and indices of an earlier pass
uint write_values;  // 0: write indices only (argmax's last pass)
uint chunk;         // top_k: entries read between flushes (a multiple of the workgroup size)
INFER_PUSH_END(SelectPush)
#endif

// Specialization constant ids, chosen per device at pipeline creation.
#define INFER_ELEMENTWISE_SPEC_LOCAL_SIZE 0     // invocations per workgroup = subgroup size * k
#define INFER_ELEMENTWISE_SPEC_MAX_SUBGROUPS 1  // argmax: upper bound of gl_NumSubgroups
#define INFER_ELEMENTWISE_SPEC_SORT_SIZE 2      // top_k: entries in shared memory, a power of 2

#endif  // INFER_SHADERS_ELEMENTWISE_H_
