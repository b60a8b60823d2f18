// Per-head RMSNorm, weight and rotate-half RoPE for q in place (QKV_Q), or for K and V into
// the cache ring (QKV_KV) (GEMMA4_TEXT.md §4.1, §4.5, §4.6, §5):
//   step:     binding 0, uint words (step.h): position of token 0 at INFER_STEP_POS0
//   QKV_Q:    q binding 1, [T, heads, d] f32, normed, weighted and rotated in place
//             q_norm binding 2, [d] f32; inv_freq binding 3, [d/2] f32
//   QKV_KV:   k binding 1, v binding 2, [T, heads, d] f32 (read only; may be one range, K=V)
//             k_norm binding 3, [d] f32; inv_freq binding 4, [d/2] f32
//             k_cache binding 5, v_cache binding 6, [slots, heads, d] f32, row p % slots
//   push: QkvPrepPush (attention.h). spec: LOCAL_SIZE, MAX_SUBGROUPS.
// Workgroup (x, y = t) does one head row; invocation i owns the RoPE pairs (j, j + d/2) for
// j = i, i + LOCAL_SIZE, .., so every element it writes is one it read.
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
#if defined(QKV_Q)
layout(binding = 1, std430) buffer Q { float src[]; };
layout(binding = 2, std430) readonly buffer QNorm { float weight[]; };
layout(binding = 3, std430) readonly buffer InvFreq { float inv_freq[]; };
#elif defined(QKV_KV)
layout(binding = 1, std430) readonly buffer K { float src[]; };
layout(binding = 2, std430) readonly buffer V { float v_src[]; };
layout(binding = 3, std430) readonly buffer KNorm { float weight[]; };
layout(binding = 4, std430) readonly buffer InvFreq { float inv_freq[]; };
layout(binding = 5, std430) writeonly buffer KCache { float k_cache[]; };
layout(binding = 6, std430) writeonly buffer VCache { float v_cache[]; };
#else
#error "define QKV_Q or QKV_KV"
#endif

shared float red_partial[kMaxSubgroups];
#include "common/reduce.glsl"
#include "common/rope.glsl"

void main() {
  const uint t = gl_WorkGroupID.y;
  const uint d = pc.d, half_d = pc.d / 2;
  const uint pos = step[INFER_STEP_POS0] + t;
#if defined(QKV_KV)
  const bool is_v = gl_WorkGroupID.x >= pc.heads;
  const uint head = is_v ? gl_WorkGroupID.x - pc.heads : gl_WorkGroupID.x;
  const uint dst = ((pos % pc.slots) * pc.heads + head) * d;
#else
  const uint head = gl_WorkGroupID.x;
#endif
  const uint row = (t * pc.heads + head) * d;

  float sum_sq = 0.0;
  for (uint j = gl_LocalInvocationID.x; j < half_d; j += gl_WorkGroupSize.x) {
#if defined(QKV_KV)
    const float a = is_v ? v_src[row + j] : src[row + j];
    const float b = is_v ? v_src[row + j + half_d] : src[row + j + half_d];
#else
    const float a = src[row + j], b = src[row + j + half_d];
#endif
    sum_sq += a * a + b * b;
  }
  red_add(sum_sq, 0, 1);
  barrier();
  const float inv = 1.0 / sqrt(red_total(0, 1) / float(d) + pc.eps);

  for (uint j = gl_LocalInvocationID.x; j < half_d; j += gl_WorkGroupSize.x) {
#if defined(QKV_KV)
    if (is_v) {  // v_norm: no weight, no RoPE
      v_cache[dst + j] = v_src[row + j] * inv;
      v_cache[dst + j + half_d] = v_src[row + j + half_d] * inv;
      continue;
    }
#endif
    const float a = src[row + j] * inv * weight[j];
    const float b = src[row + j + half_d] * inv * weight[j + half_d];
    float s, c;
    precise float angle = float(pos) * inv_freq[j];  // rounded in f32 like the reference
    rope_sincos(angle, s, c);
#if defined(QKV_KV)
    k_cache[dst + j] = a * c - b * s;
    k_cache[dst + j + half_d] = b * c + a * s;
#else
    src[row + j] = a * c - b * s;
    src[row + j + half_d] = b * c + a * s;
#endif
  }
}
