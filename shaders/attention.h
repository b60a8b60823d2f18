// Push and specialization constants of the attention shaders (qkv_prep.comp, attend.comp,
// attend_combine.comp), shared with gpu/ops/attention.cpp, which static_asserts the sizes.
// C/GLSL common subset: 32-bit scalars only. Positions are not here: they come from the step
// buffer (step.h), so one decode recording serves every position. GLSL has one push block per
// shader: each .comp defines which it wants (INFER_ATTN_QKV_PREP, _ATTEND, _COMBINE).
#ifndef INFER_SHADERS_ATTENTION_H_
#define INFER_SHADERS_ATTENTION_H_

#include "common/host_shared.h"

// For t < T at p = step[POS0] + t: each of the `heads` rows [d] of token t is RMS-normed
// (eps inside the root), times its weight, rotated (rotate-half RoPE, angle p·inv_freq[j]).
// The kv variant's workgroups x < heads do K that way into k_cache[p % slots]; workgroups
// heads .. 2·heads - 1 write the no-weight, unrotated norm of V into v_cache[p % slots].
#if defined(__cplusplus) || defined(INFER_ATTN_QKV_PREP)
INFER_PUSH_BEGIN(QkvPrepPush)
uint T;
uint heads;  // n_q for the q variant, n_kv for the kv variant
uint d;
uint slots;  // ring rows (kv variant)
float eps;
INFER_PUSH_END(QkvPrepPush)
#endif

// Workgroup (x = split, y = token group, z = kv_head · head_groups + head group) holds ROWS
// query rows: tokens_per_group tokens times heads_per_group heads of one KV head, and the keys of
// its split of the range the rows see. direct = 1 (one split): it writes out normalised;
// else its partial (unnormalised o, running max m and sum l per row) goes to the scratch.
#if defined(__cplusplus) || defined(INFER_ATTN_ATTEND)
INFER_PUSH_BEGIN(AttendPush)
uint T;
uint n_q;
uint n_kv;
uint d;
uint slots;
uint window;  // 0: full
uint n_splits;
uint heads_per_group;   // <= ROWS and <= n_q / n_kv
uint tokens_per_group;  // ROWS / heads_per_group (1 for decode)
uint direct;
INFER_PUSH_END(AttendPush)
#endif

// Workgroup x merges the n_splits partials of query row x (t · n_q + h) into out.
#if defined(__cplusplus) || defined(INFER_ATTN_COMBINE)
INFER_PUSH_BEGIN(AttendCombinePush)
uint n_rows;  // T · n_q
uint d;
uint n_splits;
INFER_PUSH_END(AttendCombinePush)
#endif

// Scratch layout (f32): o [n_splits, n_rows, d], then (m, l) [n_splits, n_rows, 2].

// Specialization constant ids, chosen per device at pipeline creation (gpu/ops/attention.cpp).
#define INFER_ATTN_SPEC_LOCAL_SIZE 0     // invocations per workgroup = subgroup size * k
#define INFER_ATTN_SPEC_MAX_SUBGROUPS 1  // upper bound of gl_NumSubgroups (sizes shared memory)
#define INFER_ATTN_SPEC_ROWS 2           // query rows per attend workgroup
#define INFER_ATTN_SPEC_TILE 3           // keys per attend tile
#define INFER_ATTN_SPEC_MAX_D 4          // largest head dim (sizes the shared q rows)
#define INFER_ATTN_SPEC_DIMS 5           // ceil(MAX_D / LOCAL_SIZE): output dims per invocation

#endif  // INFER_SHADERS_ATTENTION_H_
