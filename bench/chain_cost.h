// What a chain of dependent products costs on the device, two ways
// (bench/shaders/chain_probe.comp), for bench/gpu_probes: a dispatch a link, ordered by pipeline
// barriers (how a decode step runs now), against one persistent dispatch whose workgroups cross a grid barrier between links and load
// the next link's weights before waiting at it (the route a whole-layer kernel would take).
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "bench/probe_spirv.h"

namespace infer::gpu {
class VulkanContext;
}  // namespace infer::bench

namespace infer::bench {

struct ChainCost {
  uint32_t n = 0;       // each link: x <- W x, W [n, n] f32
  uint32_t links = 0;   // links of the chain
  uint32_t groups = 0;  // workgroups of either form
  double dispatch_us = 0;    // median per link, a dispatch after a barrier each
  double persistent_us = 0;  // median per link, one persistent dispatch
  // The same with each link's weights loaded after its barrier: persistent_late_us minus
  // persistent_us is what loading them before it saves.
  double persistent_late_us = 0;
  // The persistent forms' results equal the dispatch form's bit for bit and no spin gave up:
  // false where the device did not keep the grid resident (persistent_us then means nothing).
  bool ok = false;
  std::vector<float> result;  // the dispatch form's x after the chain (for tests)
};

// The chain's inputs as measure_chain_cost makes them (seeded): w [links][n][n], x0 [n].
void chain_probe_inputs(uint32_t n, uint32_t links, std::vector<float>* w, std::vector<float>* x0);

// A chain of `links` products of n x n (n a multiple of 4) on `groups` workgroups of
// `local_size` invocations, weights and x random (seeded), each form replayed `passes` times
// after a warm-up.
Result<ChainCost> measure_chain_cost(const gpu::VulkanContext& ctx, uint32_t n = 1024,
                                     uint32_t links = 64, uint32_t groups = 128,
                                     uint32_t local_size = 256, int passes = 5);

}  // namespace infer::bench
