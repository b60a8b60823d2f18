// KV ring, tiered layers, with an eviction sink (docs/KV_RING.md): the rows of the window tokens
// the chunk evicts, copied to a host-visible staging buffer before kv_commit overwrites their
// slots, so the host hands them to the sink after the chunk's own wait (no download of its own).
//   step: binding 0 (step.h): T, n_keys, then at INFER_STEP_EVICT(T, n_keys) E and E slots
//   k_cache: binding 1, v_cache: binding 2, [slots + max_chunk, row] f32
//   staging: binding 3, f32; evicted token e's K row at k_dst + e·row, its V row at v_dst + e·row
//   push: KvEvictCopyPush (attention.h). Workgroup e copies evicted token e's rows (none past E).
#version 450
#extension GL_GOOGLE_include_directive : require

#define INFER_ATTN_KV_EVICT_COPY
#include "attention.h"
#include "step.h"

layout(local_size_x_id = INFER_ATTN_SPEC_LOCAL_SIZE) in;

layout(binding = 0, std430) readonly buffer Step { uint step[]; };
layout(binding = 1, std430) readonly buffer KCache { float k_cache[]; };
layout(binding = 2, std430) readonly buffer VCache { float v_cache[]; };
layout(binding = 3, std430) writeonly buffer Staging { float staging[]; };

void main() {
  const uint e = gl_WorkGroupID.x;
  const uint at = INFER_STEP_EVICT(pc.T, step[INFER_STEP_N_KEYS]);
  if (e >= step[at]) return;
  const uint src = step[at + 1 + e] * pc.row;
  const uint k_dst = pc.k_dst + e * pc.row, v_dst = pc.v_dst + e * pc.row;
  for (uint i = gl_LocalInvocationID.x; i < pc.row; i += gl_WorkGroupSize.x) {
    staging[k_dst + i] = k_cache[src + i];
    staging[v_dst + i] = v_cache[src + i];
  }
}
