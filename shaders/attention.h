// Push and specialization constants of the attention shaders (qkv_prep.comp, attend*.comp),
// shared with gpu/ops/attention.cpp, which static_asserts the sizes.
// C/GLSL common subset: 32-bit scalars only. Positions are not here: they come from the step
// buffer (step.h), so one decode recording serves every position. GLSL has one push block per
// shader: each .comp defines which it wants (INFER_ATTN_QKV_PREP, _ATTEND).
#ifndef INFER_SHADERS_ATTENTION_H_
#define INFER_SHADERS_ATTENTION_H_

#include "common/host_shared.h"

// How a layer's cache is addressed (common/kv_ring.glsl): exact positions, or the KV ring's
// tiered (full-attention) or sliding layers, which store K before RoPE (DESIGN.md §4).
#define INFER_KV_EXACT 0u
#define INFER_KV_TIERED 1u
#define INFER_KV_SLIDING 2u

// For t < T at p = step[POS0] + t, the raw projections of token t sit in one row of `stride`
// floats: q heads at 0, K heads at k_offset, V heads at v_offset (the stacked q|k|v matvec
// output; v_offset == k_offset on K=V layers). Each head row [d] is RMS-normed (eps inside the
// root) and, for q and K, weighted and rotated (rotate-half RoPE, angle p·inv_freq[j]).
// Workgroups x < n_q write q_out[t, x]; n_q .. n_q + n_kv - 1 K into k_cache[p % slots]; the
// next n_kv the no-weight, unrotated norm of V into v_cache[p % slots]. n_kv = 0: q only (a
// KV-shared layer).
#if defined(__cplusplus) || defined(INFER_ATTN_QKV_PREP)
INFER_PUSH_BEGIN(QkvPrepPush)
uint T;
uint n_q;
uint n_kv;
uint d;
uint slots;     // ring rows
uint stride;    // floats per token row of qkv
uint k_offset;  // floats into a token row
uint v_offset;
float eps;
INFER_PUSH_END(QkvPrepPush)
#endif

// Workgroup (x = split, y = token group, z = kv_head · head_groups + head group) holds ROWS
// query rows: tokens_per_group tokens times heads_per_group heads of one KV head. The keys its
// rows see are cut at run time into splits of at least min_keys keys (at most n_splits, the
// grid's x); workgroups past the last split return at once. One split: workgroup 0 writes out
// normalised. More: each writes its partial (unnormalised o, running max m and sum l per row)
// to the scratch and counts itself in counters[y · groups_z + z]; the last one to arrive
// merges the partials into out and resets the counter for the next dispatch.
// Split decode (attend_split.comp, T = 1, same push): x = 0, y = split (n_splits), z as above;
// a counter per z; partials o [split, n_q, d] then (m, l) [split, n_q].
#if defined(__cplusplus) || (defined(INFER_ATTN_ATTEND) && !defined(INFER_ATTN_PREP))
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
uint min_keys;          // keys per split at least (a multiple of TILE)
INFER_PUSH_END(AttendPush)
#endif

// Split decode with qkv_prep folded in (attend_split.comp, INFER_ATTN_PREP): AttendPush's
// fields, then QkvPrepPush's that it needs. The raw row's layout as QkvPrepPush says; prep_kv 1:
// the token's K/V are normed (K rotated) from it, written to the ring and attended from shared
// memory; 0 (a KV-shared layer): q only, the token's key read from the ring like the others.
#if defined(__cplusplus) || defined(INFER_ATTN_PREP)
INFER_PUSH_BEGIN(AttendPrepPush)
uint T;
uint n_q;
uint n_kv;
uint d;
uint slots;
uint window;
uint n_splits;
uint heads_per_group;
uint tokens_per_group;
uint min_keys;
uint k_offset;  // floats into the raw row
uint v_offset;
uint prep_kv;
float eps;
INFER_PUSH_END(AttendPrepPush)
#endif

// Two-pass decode (INFER_ATTN_SPLIT=0; T = 1), spread over many workgroups so that K/V loads are
// in flight at once (one flash workgroup per KV head leaves a big GPU waiting on memory latency).
// The n = p + 1 - lo keys the token at p sees (lo = p + 1 - window on sliding layers):
//   attend_scores: cut into at most score_groups blocks (grid x) of a multiple of score_block
//     keys, at least one; workgroup x writes scores[h, i] = q[h] · k(lo + i), unscaled, for
//     the heads h of workgroup z's group, and each head's (max, sum of exp(score - max)) over
//     its block into stats[h, x]. Subgroups take keys_per_subgroup keys a round, all their K
//     loads issued before any is used.
//   attend_pv: M, L per head from the block stats, then workgroup (x, y, z) takes output dims
//     [x·DCHUNK, ..) and the y-th of at most pv_splits key ranges (>= pv_min_keys keys each):
//     sum_i exp(score_i - M) / L · v(lo + i). One range writes out; more write partials to
//     the scratch [pv split, n_q, d] and the last range to finish (a counter per (x, z)) adds
//     them in split order: no extra dispatch, no float atomics, the same sums every run.
// scores: f32 [n_q, key_stride]; stats: f32 [n_q, score_groups, 2].
#if defined(__cplusplus) || defined(INFER_ATTN_DECODE)
INFER_PUSH_BEGIN(DecodeAttendPush)
uint n_q;
uint n_kv;
uint d;
uint slots;
uint window;           // 0: full
uint heads_per_group;  // <= HEADS and <= n_q / n_kv
uint key_stride;       // floats per head row of scores
uint score_groups;     // attend_scores' grid x: key blocks at most
uint score_block;      // keys of a block: a multiple of this
uint pv_splits;        // attend_pv's grid y: key ranges at most
uint pv_min_keys;      // keys of a range at least
INFER_PUSH_END(DecodeAttendPush)
#endif

// KV ring, tiered layers: after the forward, token t's K and V rows move from the staging slot
// slots + t to step's write slot t (kv_commit.comp; workgroup t, row = n_kv · d floats).
#if defined(__cplusplus) || defined(INFER_ATTN_KV_COMMIT)
INFER_PUSH_BEGIN(KvCommitPush)
uint T;
uint row;
uint slots;
INFER_PUSH_END(KvCommitPush)
#endif

// KV ring, tiered layers, with an eviction sink: before kv_commit, the K and V rows of each slot
// the chunk evicts (step.h's INFER_STEP_EVICT) are copied into a host-visible staging buffer at
// k_dst + e · row and v_dst + e · row (kv_evict_copy.comp; workgroup e).
#if defined(__cplusplus) || defined(INFER_ATTN_KV_EVICT_COPY)
INFER_PUSH_BEGIN(KvEvictCopyPush)
uint T;
uint row;
uint k_dst;  // floats into the staging buffer
uint v_dst;
INFER_PUSH_END(KvEvictCopyPush)
#endif

// `--evict mass`, tiered layers (attend_mass.comp): phase 0 writes each query row's
// log-sum-exp of scores, phase 1 the probability mass of each cached key summed over the rows
// (accumulate = 0: the chunk's first full layer, which overwrites the previous chunk's mass).
#if defined(__cplusplus) || defined(INFER_ATTN_MASS)
INFER_PUSH_BEGIN(MassPush)
uint T;
uint n_q;
uint n_kv;
uint d;
uint slots;  // ring rows: the chunk's own keys in the staging rows after them
uint phase;  // 0: lse, 1: key mass
uint accumulate;
INFER_PUSH_END(MassPush)
#endif

// Scratch layout (f32): o [n_splits, n_rows, d], then (m, l) [n_splits, n_rows, 2], n_rows =
// T · n_q (attend_pv: partials [pv split, n_q, d] only). Counters: uint, zero between
// dispatches.
#define INFER_ATTN_MAX_SPLITS 64  // n_splits at most (sizes the merge's shared weights)

// Specialization constant ids, chosen per device at pipeline creation (gpu/ops/attention.cpp).
#define INFER_ATTN_SPEC_LOCAL_SIZE 0     // invocations per workgroup = subgroup size * k
#define INFER_ATTN_SPEC_MAX_SUBGROUPS 1  // upper bound of gl_NumSubgroups (sizes shared memory)
#define INFER_ATTN_SPEC_ROWS 2           // query rows per attend workgroup
#define INFER_ATTN_SPEC_TILE 3           // keys per attend tile
#define INFER_ATTN_SPEC_MAX_D 4          // largest head dim (attend_scores: the head dim)
#define INFER_ATTN_SPEC_DIMS 5           // ceil(MAX_D / LOCAL_SIZE): output dims per invocation
#define INFER_ATTN_SPEC_KEYS_PER_SUBGROUP 6  // attend_scores: keys each subgroup takes
#define INFER_ATTN_SPEC_D_CHUNKS 7       // attend_scores: ceil(MAX_D / subgroup size)
#define INFER_ATTN_SPEC_DCHUNK 8         // attend_pv: output dims per workgroup
#define INFER_ATTN_SPEC_PV_UNROLL 9      // attend_pv: V rows each invocation loads at once
#define INFER_ATTN_SPEC_KV_MODE 10       // INFER_KV_*: common/kv_ring.glsl, one pipeline a mode
#define INFER_ATTN_SPEC_SLICE 11         // attend_tiled: dims of a staged Q/K slice
#define INFER_ATTN_SPEC_V_KEYS 12        // attend_tiled: keys of a staged V sub-tile
#define INFER_ATTN_SPEC_STAGE_VECS 13    // attend_tiled: vec4s of the shared staging region

#endif  // INFER_SHADERS_ATTENTION_H_
