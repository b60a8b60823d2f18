// What ordering costs on this device (bench/sync_cost.cpp), for bench/gpu_probes: the price of a
// dependent dispatch against a grid-wide barrier inside one persistent dispatch, the two ways a
// decode step can order its ~400 dependent steps.
//   sync:  binding 0, coherent uint [3 + 2 * groups]: [0] arrivals, [1] generation, then two
//          rows of one word a workgroup (a phase's writes, alternating rows), then the count
//          form's arrivals
//   error: binding 1, uint [1]: bit 0 a spin gave up (workgroups not all resident), bit 1 a
//          workgroup saw a neighbour's word from the wrong phase (the barrier did not order)
//   push: phases (0: an empty dispatch, which touches nothing), spin_limit, form (0: by
//   generation, 1: by count).
//   spec 0: LOCAL_SIZE.
// Each phase, every workgroup writes its word, crosses the grid barrier, and checks its
// neighbour's word of that phase: a barrier that does not order memory fails the check.
#version 450
#extension GL_KHR_memory_scope_semantics : require

layout(local_size_x_id = 0) in;

layout(binding = 0, std430) coherent buffer Sync { uint sync_words[]; };
layout(binding = 1, std430) coherent buffer Error { uint error_bits[]; };

layout(push_constant) uniform Push {
  uint phases;
  uint spin_limit;
  uint form;
} pc;

shared uint gen_sh;

#include "spin.glsl"

// Sense by generation: read the generation, arrive; the last to arrive resets the count and
// bumps the generation, the others spin until it moves (at most spin_limit reads, so a grid that
// is not all resident reports an error instead of hanging).
void grid_barrier(uint groups) {
  barrier();
  if (gl_LocalInvocationIndex == 0) {
    const uint gen = atomicLoad(sync_words[1], gl_ScopeDevice, gl_StorageSemanticsBuffer,
                                gl_SemanticsAcquire);
    const uint arrived = atomicAdd(sync_words[0], 1u, gl_ScopeDevice, gl_StorageSemanticsBuffer,
                                   gl_SemanticsAcquireRelease) + 1u;
    if (arrived == groups) {
      atomicStore(sync_words[0], 0u, gl_ScopeDevice, gl_StorageSemanticsBuffer,
                  gl_SemanticsRelaxed);
      atomicAdd(sync_words[1], 1u, gl_ScopeDevice, gl_StorageSemanticsBuffer,
                gl_SemanticsRelease);
    } else {
      uint spins = 0;
      while (atomicLoad(sync_words[1], gl_ScopeDevice, gl_StorageSemanticsBuffer,
                        gl_SemanticsAcquire) == gen) {
        if (gave_up(++spins)) {
            break;
        }
      }
    }
  }
  barrier();
}

// By count: its arrivals word only grows (no reset, no generation word): a barrier is passed
// once the word reaches `target`, so the last arrival's own atomic releases the others (one L2
// round trip less than by generation), and the spin polls relaxed, with one acquire fence after
// it instead of an acquire a read.
void grid_barrier_count(uint word, uint target) {
  barrier();
  if (gl_LocalInvocationIndex == 0) {
    atomicAdd(sync_words[word], 1u, gl_ScopeDevice, gl_StorageSemanticsBuffer,
              gl_SemanticsRelease);
    uint spins = 0;
    while (int(atomicLoad(sync_words[word], gl_ScopeDevice, gl_StorageSemanticsBuffer,
                          gl_SemanticsRelaxed) - target) < 0) {  // wrap-safe
      if (gave_up(++spins)) {
        break;
      }
    }
    memoryBarrier(gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsAcquire);
  }
  barrier();
}

void main() {
  const uint groups = gl_NumWorkGroups.x, g = gl_WorkGroupID.x;
  if (pc.phases == 0) return;  // the empty dispatch: launch and retire only
  // Values of this run start at the generation (equal in every workgroup: it moves only once all
  // have arrived at the first barrier), so a word left by an earlier replay never passes.
  // By count, a run starts at a multiple of groups (every run adds phases · groups), which a
  // workgroup finds by rounding down even after faster ones have arrived at the first barrier.
  const uint count_word = 2 + 2 * groups;
  if (gl_LocalInvocationIndex == 0) {
    gen_sh = pc.form == 1u ? atomicLoad(sync_words[count_word], gl_ScopeDevice,
                                        gl_StorageSemanticsBuffer, gl_SemanticsAcquire) /
                                 groups
                           : atomicLoad(sync_words[1], gl_ScopeDevice, gl_StorageSemanticsBuffer,
                                        gl_SemanticsAcquire);
  }
  barrier();
  const uint base = gen_sh;
  for (uint phase = 0; phase < pc.phases; ++phase) {
    const uint row = 2 + (phase % 2) * groups;
    if (gl_LocalInvocationIndex == 0) {
      atomicStore(sync_words[row + g], base + phase + 1u, gl_ScopeDevice,
                  gl_StorageSemanticsBuffer, gl_SemanticsRelease);
    }
    if (pc.form == 1u) {
      grid_barrier_count(count_word, (base + phase + 1u) * groups);
    } else {
      grid_barrier(groups);
    }
    if (gl_LocalInvocationIndex == 0) {
      const uint seen = atomicLoad(sync_words[row + (g + 1) % groups], gl_ScopeDevice,
                                   gl_StorageSemanticsBuffer, gl_SemanticsAcquire);
      if (seen != base + phase + 1u && (error_bits[0] & 1u) == 0u) atomicOr(error_bits[0], 2u);
    }
  }
}
