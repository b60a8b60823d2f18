// Per-head RMSNorm, weight and rotate-half RoPE of q, K and V in one dispatch: q into q_out, K
// and V into the cache ring (GEMMA4_TEXT.md §4.1, §4.5, §4.6, §5):
//   step:     binding 0, uint words (step.h): position of token 0 at INFER_STEP_POS0
//   qkv:      binding 1, [T, stride] f32 (read only): token t's q heads [n_q, d] at t·stride,
//             K heads [n_kv, d] at t·stride + k_offset, V heads at t·stride + v_offset (the
//             same as K on K=V layers)
//   q_norm:   binding 2, k_norm: binding 3, [d] f32; inv_freq: binding 4, [d/2] f32
//   q_out:    binding 5, [T, n_q, d] f32
//   k_cache:  binding 6, v_cache: binding 7, [slots, n_kv, d] f32, row p % slots (exact and
//             sliding ring; tiered ring: staging row slots + t, K unrotated in ring modes)
//   push: QkvPrepPush (attention.h). spec: LOCAL_SIZE, MAX_SUBGROUPS, KV_MODE.
// Workgroup (x, y = t) does one head row: x < n_q a q head, then n_kv K heads, then n_kv V
// heads. Invocation i owns the RoPE pairs (j, j + d/2) for j = i, i + LOCAL_SIZE, ..
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#define INFER_ATTN_QKV_PREP
#include "attention.h"
#include "step.h"

layout(local_size_x_id = INFER_ATTN_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_ATTN_SPEC_MAX_SUBGROUPS) const uint kMaxSubgroups = 32;

layout(binding = 0, std430) readonly buffer Step { uint step[]; };
layout(binding = 1, std430) readonly buffer Qkv { float qkv[]; };
layout(binding = 2, std430) readonly buffer QNorm { float q_norm[]; };
layout(binding = 3, std430) readonly buffer KNorm { float k_norm[]; };
layout(binding = 4, std430) readonly buffer InvFreq { float inv_freq[]; };
layout(binding = 5, std430) writeonly buffer QOut { float q_out[]; };
layout(binding = 6, std430) writeonly buffer KCache { float k_cache[]; };
layout(binding = 7, std430) writeonly buffer VCache { float v_cache[]; };

shared float red_partial[kMaxSubgroups];
#include "common/reduce.glsl"
#include "common/rope.glsl"
#include "common/kv_ring.glsl"

const uint kQ = 0, kK = 1, kV = 2;

void main() {
  const uint t = gl_WorkGroupID.y;
  const uint d = pc.d, half_d = pc.d / 2;
  const uint pos = step[INFER_STEP_POS0] + t;         // logical: the exact ring slot
  const uint rope_pos = kv_cache_pos0() + t;  // where q (and exact K) are rotated
  const uint x = gl_WorkGroupID.x;
  const uint kind = x < pc.n_q ? kQ : x < pc.n_q + pc.n_kv ? kK : kV;
  const uint head = kind == kQ ? x : kind == kK ? x - pc.n_q : x - pc.n_q - pc.n_kv;
  const uint src = t * pc.stride + (kind == kQ ? 0 : kind == kK ? pc.k_offset : pc.v_offset) +
                   head * d;
  const uint slot = kKvMode == INFER_KV_TIERED ? pc.slots + t : pos % pc.slots;
  const uint dst = kind == kQ ? (t * pc.n_q + head) * d : (slot * pc.n_kv + head) * d;

  float sum_sq = 0.0;
  for (uint j = gl_LocalInvocationID.x; j < half_d; j += gl_WorkGroupSize.x) {
    const float a = qkv[src + j], b = qkv[src + j + half_d];
    sum_sq += a * a + b * b;
  }
  red_add(sum_sq, 0, 1);
  barrier();
  const float inv = 1.0 / sqrt(red_total(0, 1) / float(d) + pc.eps);

  for (uint j = gl_LocalInvocationID.x; j < half_d; j += gl_WorkGroupSize.x) {
    if (kind == kV) {  // v_norm: no weight, no RoPE
      v_cache[dst + j] = qkv[src + j] * inv;
      v_cache[dst + j + half_d] = qkv[src + j + half_d] * inv;
      continue;
    }
    const float w_a = kind == kQ ? q_norm[j] : k_norm[j];
    const float w_b = kind == kQ ? q_norm[j + half_d] : k_norm[j + half_d];
    const float a = qkv[src + j] * inv * w_a;
    const float b = qkv[src + j + half_d] * inv * w_b;
    if (kind == kK && kKvMode != INFER_KV_EXACT) {  // the ring stores K before RoPE
      k_cache[dst + j] = a;
      k_cache[dst + j + half_d] = b;
      continue;
    }
    float s, c;
    precise float angle = float(rope_pos) * inv_freq[j];  // rounded in f32 like the reference
    rope_sincos(angle, s, c);
    const float ra = a * c - b * s, rb = b * c + a * s;
    if (kind == kQ) {
      q_out[dst + j] = ra;
      q_out[dst + j + half_d] = rb;
    } else {
      k_cache[dst + j] = ra;
      k_cache[dst + j + half_d] = rb;
    }
  }
}
