// One pass of argmax over rows (value descending, lowest index on ties; select.glsl): workgroup
// (s, row) reduces input entries [s·seg_len, min((s + 1)·seg_len, n_in)) of its row to the best
// one, written at out[row·n_segs + s]. A long row (V = 262144) is split over n_segs workgroups,
// then a second pass with n_segs = 1 reduces their results.
//   in_values: binding 0, [rows, n_in] f32 (logits, or values of the pass before)
//   in_indices: binding 1, [rows, n_in] uint (read only when from_logits = 0; a first pass
//   binds the logits here as well, so no load can stray out of bounds)
//   out_values: binding 2, [rows, n_segs] f32 (written when write_values = 1)
//   out_indices: binding 3, [rows, n_segs] uint
//   push: SelectPush (elementwise.h), k = 1. spec: LOCAL_SIZE, MAX_SUBGROUPS. Workgroup (s, row).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#define INFER_SELECT
#include "elementwise.h"
#include "select.glsl"

layout(local_size_x_id = INFER_ELEMENTWISE_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_ELEMENTWISE_SPEC_MAX_SUBGROUPS) const uint kMaxSubgroups = 32;

layout(binding = 0, std430) readonly buffer InValues { float in_values[]; };
layout(binding = 1, std430) readonly buffer InIndices { uint in_indices[]; };
layout(binding = 2, std430) writeonly buffer OutValues { float out_values[]; };
layout(binding = 3, std430) writeonly buffer OutIndices { uint out_indices[]; };

const uint kBatch = 8;  // loads an invocation has in flight

shared uint s_key[kMaxSubgroups];
shared uint s_idx[kMaxSubgroups];

void main() {
  const uint seg = gl_WorkGroupID.x, row = gl_WorkGroupID.y;
  const uint base = row * pc.n_in;
  const uint end = min((seg + 1) * pc.seg_len, pc.n_in);
  uint best_key = 0u, best_idx = kNoIndex;  // padding: any entry ranks before it
  const uint step = gl_WorkGroupSize.x;
  for (uint i0 = seg * pc.seg_len + gl_LocalInvocationID.x; i0 < end; i0 += step * kBatch) {
    // All loads of a batch first, then the compares: one memory latency per batch.
    float v[kBatch];
    uint ids[kBatch];
    for (uint b = 0, i = i0; b < kBatch; ++b, i += step) {
      v[b] = i < end ? in_values[base + i] : 0.0;
      ids[b] = i < end && pc.from_logits == 0u ? in_indices[base + i] : i;
    }
    for (uint b = 0, i = i0; b < kBatch; ++b, i += step) {
      const uint key = value_key(v[b]);
      if (i < end && ranks_before(key, ids[b], best_key, best_idx)) {
        best_key = key;
        best_idx = ids[b];
      }
    }
  }
  // The subgroup's best key, then the lowest index among the invocations holding it.
  const uint top = subgroupMax(best_key);
  const uint top_idx = subgroupMin(best_key == top ? best_idx : kNoIndex);
  if (subgroupElect()) {
    s_key[gl_SubgroupID] = top;
    s_idx[gl_SubgroupID] = top_idx;
  }
  barrier();
  if (gl_LocalInvocationID.x == 0u) {
    uint key = s_key[0], idx = s_idx[0];
    for (uint g = 1; g < gl_NumSubgroups; ++g) {
      if (ranks_before(s_key[g], s_idx[g], key, idx)) {
        key = s_key[g];
        idx = s_idx[g];
      }
    }
    const uint o = row * pc.n_segs + seg;
    if (pc.write_values != 0u) out_values[o] = key_value(key);
    out_indices[o] = idx;
  }
}
