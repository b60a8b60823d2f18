// One pass of top-k over rows (value descending, lowest index first on ties; select.glsl):
// workgroup (s, row) keeps the best k of input entries [s·seg_len, min((s + 1)·seg_len, n_in))
// of its row, sorted, at out[(row·n_segs + s)·k ...]. A long row is split over n_segs
// workgroups, then a second pass with n_segs = 1 merges their n_segs·k results.
//   in_values: binding 0, [rows, n_in] f32 (logits, or values of the pass before)
//   in_indices: binding 1, [rows, n_in] uint (read only when from_logits = 0; a first pass
//   binds the logits here as well, so no load can stray out of bounds)
//   out_values: binding 2, [rows, n_segs, k] f32    out_indices: binding 3, [rows, n_segs, k] uint
//   push: SelectPush (elementwise.h), chunk + k <= SORT_SIZE. spec: LOCAL_SIZE, SORT_SIZE.
// Streaming filter: shared memory holds the best k so far in [0, k) and, after them, the entries
// that rank before the k-th best as it stood at the last flush. When another chunk might not
// fit, a flush sorts them all (bitonic) and keeps the best k. For logits in any usual order few
// entries pass the filter, so a workgroup sorts a few times however long its segment.
#version 450
#extension GL_GOOGLE_include_directive : require

#define INFER_SELECT
#include "elementwise.h"
#include "select.glsl"

layout(local_size_x_id = INFER_ELEMENTWISE_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_ELEMENTWISE_SPEC_SORT_SIZE) const uint kSortSize = 2048;

layout(binding = 0, std430) readonly buffer InValues { float in_values[]; };
layout(binding = 1, std430) readonly buffer InIndices { uint in_indices[]; };
layout(binding = 2, std430) writeonly buffer OutValues { float out_values[]; };
layout(binding = 3, std430) writeonly buffer OutIndices { uint out_indices[]; };

shared uint s_key[kSortSize];
shared uint s_idx[kSortSize];
shared uint s_count;  // entries held

// Bitonic sort of entries [0, n), n a power of 2, best first. Uniform control flow.
void sort_entries(uint n) {
  for (uint size = 2; size <= n; size <<= 1) {
    for (uint stride = size >> 1; stride > 0; stride >>= 1) {
      for (uint t = gl_LocalInvocationID.x; t < n / 2; t += gl_WorkGroupSize.x) {
        const uint i = 2 * t - (t & (stride - 1));
        const uint j = i + stride;
        const uint key_i = s_key[i], idx_i = s_idx[i], key_j = s_key[j], idx_j = s_idx[j];
        // Blocks of `size` alternate best-first and best-last so that pairs of them form the
        // bitonic blocks of the next size; the whole range (size = n) ends best-first.
        if (ranks_before(key_j, idx_j, key_i, idx_i) == ((i & size) == 0u)) {
          s_key[i] = key_j;
          s_idx[i] = idx_j;
          s_key[j] = key_i;
          s_idx[j] = idx_i;
        }
      }
      barrier();
    }
  }
}

// Sorts the `count` entries held (padded to a power of 2) and keeps the best k. Uniform.
void flush(uint count) {
  uint n = 1;
  while (n < count) n <<= 1;
  for (uint i = count + gl_LocalInvocationID.x; i < n; i += gl_WorkGroupSize.x) {
    s_key[i] = 0u;
    s_idx[i] = kNoIndex;
  }
  barrier();
  sort_entries(n);
  if (gl_LocalInvocationID.x == 0u) s_count = pc.k;
  barrier();
}

void main() {
  const uint seg = gl_WorkGroupID.x, row = gl_WorkGroupID.y;
  const uint base = row * pc.n_in;
  const uint begin = seg * pc.seg_len, end = min(begin + pc.seg_len, pc.n_in);
  for (uint i = gl_LocalInvocationID.x; i < pc.k; i += gl_WorkGroupSize.x) {
    s_key[i] = 0u;  // padding ranks after every entry
    s_idx[i] = kNoIndex;
  }
  if (gl_LocalInvocationID.x == 0u) s_count = pc.k;
  barrier();
  uint kth_key = 0u, kth_idx = kNoIndex;  // the k-th best at the last flush
  for (uint c0 = begin; c0 < end; c0 += pc.chunk) {
    const uint count = s_count;
    barrier();  // everyone has read s_count before it changes
    if (count + pc.chunk > kSortSize) {
      flush(count);
      kth_key = s_key[pc.k - 1];
      kth_idx = s_idx[pc.k - 1];
    }
    const uint c1 = min(c0 + pc.chunk, end);
    for (uint i = c0 + gl_LocalInvocationID.x; i < c1; i += gl_WorkGroupSize.x) {
      const uint key = value_key(in_values[base + i]);
      const uint idx = pc.from_logits != 0u ? i : in_indices[base + i];
      if (ranks_before(key, idx, kth_key, kth_idx)) {
        const uint slot = atomicAdd(s_count, 1u);
        s_key[slot] = key;
        s_idx[slot] = idx;
      }
    }
    barrier();
  }
  flush(s_count);
  const uint o = (row * pc.n_segs + seg) * pc.k;
  for (uint j = gl_LocalInvocationID.x; j < pc.k; j += gl_WorkGroupSize.x) {
    out_values[o + j] = key_value(s_key[j]);
    out_indices[o + j] = s_idx[j];
  }
}
