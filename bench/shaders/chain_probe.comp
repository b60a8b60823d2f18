// What a chain of dependent products costs, two ways (bench/chain_cost.cpp, for bench/gpu_probes):
// x_{k+1} = W_k · x_k for phases k = first .. first + phases - 1, W_k [n, n] f32 (a decode
// step's products are such a chain, ~460 links a token on E2B).
//   w:     binding 0, f32 [phases][n][n], read as vec4
//   x:     binding 1, coherent f32 [2][n] (as vec4): phase k reads row k % 2, writes row
//          (k + 1) % 2
//   sync:  binding 2, coherent uint [1]: arrivals, only ever growing (the persistent form's grid
//          barrier by count, as sync_probe.comp's)
//   error: binding 3, uint [1]: bit 0 a spin gave up (the grid was not all resident)
//   push:  n (a multiple of 4), first, phases, spin_limit, prefetch (0: the persistent form
//          loads a link's weights after its barrier, to tell the barrier's gain from the
//          prefetch's).
//   spec:  0 LOCAL_SIZE, 1 VECS (vec4s of a row a lane holds: n / 4 over the smallest subgroup
//          size, rounded up), 2 ROWS (rows a subgroup takes a phase).
// Subgroup s of workgroup g owns rows (g · subgroups + s) · ROWS + i (past n: none), lanes over a
// row's vec4s. phases = 1 is the dispatch form: one phase, ordered by the recorder's barriers.
// phases > 1 is the persistent form: the workgroups cross a grid barrier between phases, and
// each issues the next phase's weight loads before it waits at the barrier (they depend on
// nothing a phase writes), so only x's read from L2 follows the barrier.
#version 450
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint kVecs = 8;
layout(constant_id = 2) const uint kRows = 1;

layout(binding = 0, std430) readonly buffer W { vec4 w4[]; };
// One declaration, written a component at a time: two views of the binding would be distinct
// memory objects to the compiler (no Aliased decoration), free to reorder across each other.
layout(binding = 1, std430) coherent buffer X4 { vec4 x4[]; };
layout(binding = 2, std430) coherent buffer Sync { uint arrivals[]; };
layout(binding = 3, std430) coherent buffer Error { uint error_bits[]; };

layout(push_constant) uniform Push {
  uint n;
  uint first;
  uint phases;
  uint spin_limit;
  uint prefetch;
} pc;

shared uint base_sh;

// This subgroup's rows of the current phase (wv) and of the next (wn).
vec4 wv[kRows * kVecs];
vec4 wn[kRows * kVecs];

uint row_of(uint i) { return (gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID) * kRows + i; }

uint vec_of(uint v) { return gl_SubgroupInvocationID + v * gl_SubgroupSize; }

// Loads into `dst` (wv or wn) the subgroup's rows of W_phase; past the matrix: zeros.
#define LOAD_ROWS(dst, phase)                                                        \
  [[unroll]] for (uint i = 0; i < kRows; ++i) {                                      \
    [[unroll]] for (uint v = 0; v < kVecs; ++v) {                                    \
      const uint row = row_of(i), j = vec_of(v), quads = pc.n / 4;                   \
      dst[i * kVecs + v] = row < pc.n && j < quads                                   \
                               ? w4[((phase) * pc.n + row) * quads + j]             \
                               : vec4(0.0);                                          \
    }                                                                                \
  }

// x_{phase + 1}[row] = W_phase[row] · x_phase for this subgroup's rows (weights in wv).
void product(uint phase) {
  const uint quads = pc.n / 4, in4 = (phase % 2) * quads, out0 = ((phase + 1) % 2) * pc.n;
  vec4 xv[kVecs];
  [[unroll]] for (uint v = 0; v < kVecs; ++v) {
    xv[v] = vec_of(v) < quads ? x4[in4 + vec_of(v)] : vec4(0.0);
  }
  [[unroll]] for (uint i = 0; i < kRows; ++i) {
    float acc = 0.0;
    [[unroll]] for (uint v = 0; v < kVecs; ++v) acc += dot(wv[i * kVecs + v], xv[v]);
    acc = subgroupAdd(acc);
    const uint at = out0 + row_of(i);
    if (subgroupElect() && row_of(i) < pc.n) x4[at / 4][at % 4] = acc;
  }
}

#include "spin.glsl"

// Every invocation's writes of the phase made available, then this workgroup counted in.
void arrive() {
  controlBarrier(gl_ScopeWorkgroup, gl_ScopeDevice, gl_StorageSemanticsBuffer,
                 gl_SemanticsAcquireRelease);
  if (gl_LocalInvocationIndex == 0) {
    atomicAdd(arrivals[0], 1u, gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsRelease);
  }
}

// Until the arrivals reach `target` (relaxed polls, wrap-safe), then the others' writes made
// visible to the whole workgroup.
void wait_for(uint target) {
  if (gl_LocalInvocationIndex == 0) {
    uint spins = 0;
    while (int(atomicLoad(arrivals[0], gl_ScopeDevice, gl_StorageSemanticsBuffer,
                          gl_SemanticsRelaxed) - target) < 0) {
      if (gave_up(++spins)) {
        break;
      }
    }
    memoryBarrier(gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsAcquire);
  }
  controlBarrier(gl_ScopeWorkgroup, gl_ScopeDevice, gl_StorageSemanticsBuffer,
                 gl_SemanticsAcquireRelease);
}

void main() {
  LOAD_ROWS(wv, pc.first);
  if (pc.phases <= 1) {  // the dispatch form
    product(pc.first);
    return;
  }
  const uint groups = gl_NumWorkGroups.x;
  // A run adds phases · groups arrivals, so it starts at a multiple of groups, found by rounding
  // down even after faster workgroups have counted in.
  if (gl_LocalInvocationIndex == 0) {
    base_sh = atomicLoad(arrivals[0], gl_ScopeDevice, gl_StorageSemanticsBuffer,
                         gl_SemanticsRelaxed) / groups * groups;
  }
  barrier();
  const uint base = base_sh;
  for (uint k = 0; k < pc.phases; ++k) {
    if (k > 0) wait_for(base + k * groups);  // phase k - 1 written by every workgroup
    if (pc.prefetch != 0u) {
      if (k > 0) {
        [[unroll]] for (uint i = 0; i < kRows * kVecs; ++i) wv[i] = wn[i];
      }
      if (k + 1 < pc.phases) LOAD_ROWS(wn, pc.first + k + 1);
    } else if (k > 0) {
      LOAD_ROWS(wv, pc.first + k);
    }
    product(pc.first + k);
    if (k + 1 < pc.phases) arrive();
  }
}
