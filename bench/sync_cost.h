// What ordering dependent work costs on the device, for bench/gpu_probes (a decode token is
// ~400-460 dependent steps): a dependent dispatch (an empty dispatch after a barrier), a
// dispatch without one, and a grid-wide barrier inside one persistent dispatch
// (bench/shaders/sync_probe.comp), the figure a whole-layer kernel would pay per step instead.
#pragma once

#include <cstdint>

#include "base/result.h"
#include "bench/probe_spirv.h"

namespace infer::gpu {
class VulkanContext;
}  // namespace infer::bench

namespace infer::bench {

// Reads a spinning workgroup of the probes (sync_probe.comp, chain_probe.comp) makes before it
// gives up: far beyond any real wait (a phase takes microseconds), small enough that a grid
// the device cannot hold fails in well under a second instead of hanging.
constexpr uint32_t kProbeSpinLimit = 1u << 20;

struct SyncCost {
  double dependent_dispatch_us = 0;  // median per dispatch, each after a barrier on the last
  double free_dispatch_us = 0;       // median per dispatch, no barriers between them
  double grid_barrier_us = 0;        // median per grid barrier of the persistent dispatch
  double grid_barrier_count_us = 0;  // the same with the barrier by count (sync_probe.comp)
  uint32_t dispatch_groups = 0;      // workgroups of each empty dispatch
  uint32_t grid_groups = 0;          // workgroups of the persistent dispatch
  // The grid barrier ordered memory and never gave up spinning: false where the device did not
  // keep every workgroup resident (then grid_barrier_us means nothing).
  bool grid_barrier_ok = false;
  bool grid_barrier_count_ok = false;  // the same for the barrier by count
};

// `dispatches` empty dispatches per recording (with and without barriers), `phases` grid
// barriers in one dispatch of `grid_groups` workgroups of `local_size` invocations; each
// recording replayed `passes` times after a warm-up.
Result<SyncCost> measure_sync_cost(const gpu::VulkanContext& ctx, uint32_t dispatches = 400,
                                   uint32_t phases = 2000, uint32_t grid_groups = 128,
                                   uint32_t local_size = 256, int passes = 5);

}  // namespace infer::bench
