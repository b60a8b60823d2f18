// KV ring, tiered layers (DESIGN.md §4): the chunk's K and V rows, written by qkv_prep to the
// staging slots slots + t (so the victims they replace were still attended), move to the
// plan's write slots once every layer reading them has run.
//   step: binding 0 (step.h): T, write slots at INFER_STEP_WRITES(T)
//   k_cache: binding 1, v_cache: binding 2, [slots + max_chunk, row] f32
//   push: KvCommitPush (attention.h). Workgroup t copies token t's row of K and of V.
#version 450
#extension GL_GOOGLE_include_directive : require

#define INFER_ATTN_KV_COMMIT
#include "attention.h"
#include "step.h"

layout(local_size_x_id = INFER_ATTN_SPEC_LOCAL_SIZE) in;

layout(binding = 0, std430) readonly buffer Step { uint step[]; };
layout(binding = 1, std430) buffer KCache { float k_cache[]; };
layout(binding = 2, std430) buffer VCache { float v_cache[]; };

void main() {
  const uint t = gl_WorkGroupID.x;
  if (t >= pc.T) return;
  const uint src = (pc.slots + t) * pc.row;
  const uint dst = step[INFER_STEP_WRITES(pc.T) + t] * pc.row;
  for (uint i = gl_LocalInvocationID.x; i < pc.row; i += gl_WorkGroupSize.x) {
    k_cache[dst + i] = k_cache[src + i];
    v_cache[dst + i] = v_cache[src + i];
  }
}
