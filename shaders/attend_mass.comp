// Attention mass for `--evict mass` (H2O, DESIGN.md §4, docs/KV_RING.md "Mass"), on a tiered
// (full-attention) layer of the KV ring: mass[s] (+)= Σ_{t, h} softmax_t,h(s) for the cached
// keys s < n_keys, the softmax of query (t, h) over every key it sees (cache and chunk, §4.7),
// as model/ops/attention_mass.cpp. Scores are recomputed after attention (the attention
// shaders never hold all of a row's probabilities), in two phases of one shader (push.phase):
//   0: workgroup (h, t): lse[t·n_q + h] = log Σ_s exp(q·k_s) over s <= n_keys + t, subgroup
//      per key (lanes over d, coalesced), online max/sum per subgroup, merged in shared memory;
//   1: subgroup per cached key s (workgroup x holds gl_NumSubgroups of them): loads k_s rotated
//      once per KV head into registers, then Σ over its group's rows of exp(q·k_s - lse). One
//      writer per mass[s], so no atomics and a fixed summation order.
// Bindings: 0 step, 1 q [T, n_q, d] (normed, rotated), 2 k_cache [slots + T, n_kv, d] (key s
// at kv_slot(s), common/kv_ring.glsl), 3 inv_freq [d/2], 4 lse [T · n_q], 5 mass [n_keys].
// Spec KV_MODE: always INFER_KV_TIERED (gpu/ops/attention_mass.cpp).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#define INFER_ATTN_MASS
#include "attention.h"
#include "step.h"

layout(local_size_x_id = INFER_ATTN_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_ATTN_SPEC_MAX_SUBGROUPS) const uint kMaxSubgroups = 32;
layout(constant_id = INFER_ATTN_SPEC_D_CHUNKS) const uint kChunks = 16;

layout(binding = 0, std430) readonly buffer Step { uint step[]; };
layout(binding = 1, std430) readonly buffer Q { float q[]; };
layout(binding = 2, std430) readonly buffer KCache { float k_cache[]; };
layout(binding = 3, std430) readonly buffer InvFreq { float inv_freq[]; };
layout(binding = 4, std430) buffer Lse { float lse[]; };
layout(binding = 5, std430) buffer Mass { float mass[]; };

#define INFER_KV_ROTATE_KEYS
#include "common/rope.glsl"
#include "common/kv_ring.glsl"

// The running max before any key: finite, so no inf - inf.
const float kNone = -3.0e38;

shared float m_sh[kMaxSubgroups];
shared float l_sh[kMaxSubgroups];

// q[t, h] · k_s, k_s element e = c · subgroup size + lane in kr[c].
float dot_row(uint t, uint h, float kr[kChunks]) {
  const uint base = (t * pc.n_q + h) * pc.d;
  float acc = 0.0;
  for (uint c = 0; c < kChunks; ++c) {
    const uint e = gl_SubgroupInvocationID + c * gl_SubgroupSize;
    if (e >= pc.d) break;
    acc += q[base + e] * kr[c];
  }
  return subgroupAdd(acc);
}

// This lane's elements of key s (cache position s) of KV head kvh, rotated.
void load_key(uint s, uint kvh, out float kr[kChunks]) {
  const uint row = kv_slot(s, pc.slots) * pc.n_kv * pc.d + kvh * pc.d;
  for (uint c = 0; c < kChunks; ++c) {
    const uint e = gl_SubgroupInvocationID + c * gl_SubgroupSize;
    kr[c] = e < pc.d ? kv_key(row, e, pc.d, s) : 0.0;
  }
}

void log_sum_exp() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
  const uint kvh = h / (pc.n_q / pc.n_kv);
  const uint n = step[INFER_STEP_N_KEYS] + t + 1;  // keys query t sees
  float m = kNone, l = 0.0;                         // uniform in the subgroup
  for (uint s = gl_SubgroupID; s < n; s += gl_NumSubgroups) {
    float kr[kChunks];
    load_key(s, kvh, kr);
    const float x = dot_row(t, h, kr);
    const float m_new = max(m, x);
    l = l * exp(m - m_new) + exp(x - m_new);
    m = m_new;
  }
  if (subgroupElect()) {
    m_sh[gl_SubgroupID] = m;
    l_sh[gl_SubgroupID] = l;
  }
  barrier();
  if (gl_LocalInvocationID.x == 0) {
    float mx = kNone;
    for (uint i = 0; i < gl_NumSubgroups; ++i) mx = max(mx, m_sh[i]);
    float sum = 0.0;
    for (uint i = 0; i < gl_NumSubgroups; ++i) sum += l_sh[i] * exp(m_sh[i] - mx);
    lse[t * pc.n_q + h] = mx + log(sum);
  }
}

void key_mass() {
  const uint s = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID;
  if (s >= step[INFER_STEP_N_KEYS]) return;  // uniform in the subgroup
  const uint group = pc.n_q / pc.n_kv;
  float total = 0.0;  // uniform in the subgroup
  for (uint kvh = 0; kvh < pc.n_kv; ++kvh) {
    float kr[kChunks];
    load_key(s, kvh, kr);
    for (uint t = 0; t < pc.T; ++t) {
      for (uint h = kvh * group; h < (kvh + 1) * group; ++h) {
        total += exp(dot_row(t, h, kr) - lse[t * pc.n_q + h]);
      }
    }
  }
  if (subgroupElect()) mass[s] = (pc.accumulate != 0 ? mass[s] : 0.0) + total;
}

void main() {
  if (pc.phase == 0) {
    log_sum_exp();
  } else {
    key_mass();
  }
}
