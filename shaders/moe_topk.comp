// MoE routing choice (GEMMA4_TEXT.md §4.9), one invocation per token, f32:
//   prob = softmax(logits[t]); the k largest probabilities, descending, ties to the lower index
//   (a stable argsort, as the CPU reference); w_j = p_j / Σp · per_expert_scale[e_j].
//   logits: binding 0, [T, E] f32   per_expert_scale: binding 1, [E] f32
//   idx: binding 2, [T, k] uint     w: binding 3, [T, k] f32
//   push: MoePush (moe.h). spec: LOCAL_SIZE tokens per workgroup, MAX_K >= k.
// Probabilities are recomputed where needed rather than stored: the same expression on the same
// inputs gives the same bits, so comparisons and ties are exact.
#version 450
#extension GL_GOOGLE_include_directive : require

#include "moe.h"

layout(local_size_x_id = INFER_MOE_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_MOE_SPEC_MAX_K) const uint kMaxK = 8;

layout(binding = 0, std430) readonly buffer Logits { float logits[]; };
layout(binding = 1, std430) readonly buffer Scale { float per_expert_scale[]; };
layout(binding = 2, std430) writeonly buffer Idx { uint idx[]; };
layout(binding = 3, std430) writeonly buffer W { float w[]; };

void main() {
  const uint t = gl_GlobalInvocationID.x;
  if (t >= pc.T) return;
  const uint lb = t * pc.E;
  float mx = logits[lb];
  for (uint e = 1; e < pc.E; ++e) mx = max(mx, logits[lb + e]);
  float sum = 0.0;
  for (uint e = 0; e < pc.E; ++e) sum += exp(logits[lb + e] - mx);
  const float inv = 1.0 / sum;

  // Pick j is the largest (p, -e) strictly below pick j - 1 (prev_p, prev_e) in that order.
  float chosen_p[kMaxK];
  uint chosen[kMaxK];
  float picked = 0.0;
  float prev_p = 0.0;
  uint prev_e = 0;
  for (uint j = 0; j < pc.k; ++j) {
    uint best = pc.E;
    float best_p = 0.0;
    for (uint e = 0; e < pc.E; ++e) {
      const float p = exp(logits[lb + e] - mx) * inv;
      const bool below = j == 0 || p < prev_p || (p == prev_p && e > prev_e);
      if (below && (best == pc.E || p > best_p)) {
        best = e;
        best_p = p;
      }
    }
    chosen[j] = best;
    chosen_p[j] = best_p;
    picked += best_p;
    prev_p = best_p;
    prev_e = best;
  }
  for (uint j = 0; j < pc.k; ++j) {
    idx[t * pc.k + j] = chosen[j];
    w[t * pc.k + j] = chosen_p[j] / picked * per_expert_scale[chosen[j]];
  }
}
