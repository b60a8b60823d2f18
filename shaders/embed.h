// Push and specialization constants of embed.comp and ple_inputs.comp, shared with
// gpu/ops/embed.cpp (which static_asserts the sizes). C/GLSL common subset: 32-bit scalars only.
// GLSL declares one push block per shader: ple_inputs.comp defines INFER_PLE_INPUTS first.
#ifndef INFER_SHADERS_EMBED_H_
#define INFER_SHADERS_EMBED_H_

#include "common/host_shared.h"

#if defined(__cplusplus) || !defined(INFER_PLE_INPUTS)
// x[t, :] = table[ids[t], :] · scale, t < n_tokens. `rows` and `cols` name the table's shape so
// common/weights.glsl can decode it.
INFER_PUSH_BEGIN(EmbedPush)
uint rows;      // V: ids at or past it are clamped to the last row
uint cols;      // H
uint n_tokens;  // T
float scale;    // √H, rounded as the checkpoint's dtype wants (GEMMA4_TEXT.md §4.2)
INFER_PUSH_END(EmbedPush)
#endif

#if defined(__cplusplus) || defined(INFER_PLE_INPUTS)
// ple[r, j] = (rmsnorm(proj[r, :] · proj_scale) · norm_w[j] + rows[r, j] · ple_scale) · 2^(-1/2)
// over rows r = t·L + l of P floats (GEMMA4_TEXT.md §4.3).
INFER_PUSH_BEGIN(PleInputsPush)
uint rows;         // T·L
uint P;            // floats per row
float proj_scale;  // H^(-1/2)
float ple_scale;   // √P as the table's dtype rounds it
float eps;
INFER_PUSH_END(PleInputsPush)
#endif

// Specialization constant ids, chosen per device at pipeline creation (gpu/ops/embed.cpp).
#define INFER_EMBED_SPEC_LOCAL_SIZE 0     // invocations per workgroup = subgroup size * k
#define INFER_EMBED_SPEC_MAX_SUBGROUPS 1  // ple_inputs: upper bound of gl_NumSubgroups

#endif  // INFER_SHADERS_EMBED_H_
