// bench/gpu_probes: what ordering dependent work costs on a Vulkan device, apart from infer's own
// bench (which measures load, prefill, decode and memory bandwidth). It prints one JSON object:
// an empty dependent dispatch against a free one and a grid barrier (sync_cost.h), and a chain
// of dependent products as dispatches against one persistent dispatch (chain_cost.h).
// Usage: gpu_probes [--device N]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

#include "bench/chain_cost.h"
#include "bench/sync_cost.h"
#include "gpu/context.h"

namespace infer::bench {
namespace {

int run(int device_index) {
  gpu::ContextOptions options;
  options.device_index = device_index;
  auto ctx = gpu::VulkanContext::create(options);
  if (!ctx.ok()) {
    std::fprintf(stderr, "gpu_probes: %s\n", ctx.error().message.c_str());
    return 1;
  }
  const gpu::DeviceInfo& info = (*ctx)->info();
  const bool cpu_device = info.type == VK_PHYSICAL_DEVICE_TYPE_CPU;
  // The persistent grids: a workgroup a compute core where the driver says how many (an H200's
  // 132 SMs: 128; an APU's 12 CUs: 12), so the grid is resident and its barriers mean
  // something; 32 where it does not say; one on a CPU device, which runs a few workgroups at a
  // time.
  const uint32_t cores = info.compute_cores;
  const uint32_t grid = cpu_device ? 1 : cores > 0 ? std::min(128u, cores) : 32;
  auto sync = measure_sync_cost(**ctx, 400, 2000, grid);
  auto chain = cpu_device ? measure_chain_cost(**ctx, 256, 8, 1)
                          : measure_chain_cost(**ctx, 1024, 64, grid);
  if (!sync.ok() || !chain.ok()) {
    std::fprintf(stderr, "gpu_probes: %s\n",
                 (!sync.ok() ? sync.error() : chain.error()).message.c_str());
    return 1;
  }
  nlohmann::ordered_json j;
  j["device_name"] = info.name;
  j["device_driver"] = info.driver_name;
  // What a dependent step costs, against what a persistent kernel's grid barrier would.
  j["sync_dependent_dispatch_us"] = sync->dependent_dispatch_us;
  j["sync_free_dispatch_us"] = sync->free_dispatch_us;
  j["sync_grid_barrier_us"] = sync->grid_barrier_us;
  j["sync_grid_groups"] = sync->grid_groups;
  j["sync_grid_barrier_ok"] = sync->grid_barrier_ok;
  j["sync_grid_barrier_count_us"] = sync->grid_barrier_count_us;
  j["sync_grid_barrier_count_ok"] = sync->grid_barrier_count_ok;
  j["sync_measure"] =
      "medians of fence-timed replays: 400 empty dispatches of sync_grid_groups workgroups, each "
      "after a barrier on the one before (dependent) or with none (free); one dispatch crossing "
      "2000 grid-wide barriers (atomic arrive, spin on a generation word; _count: spin on the "
      "arrivals word itself, relaxed, one acquire fence after), per barrier; ok: every workgroup "
      "was resident and saw the others' writes";
  // A chain of dependent products, a dispatch a link against one persistent dispatch that loads
  // the next link's weights before each grid barrier (the route a whole-layer kernel would take).
  j["sync_chain_n"] = chain->n;
  j["sync_chain_links"] = chain->links;
  j["sync_chain_groups"] = chain->groups;
  j["sync_chain_dispatch_us"] = chain->dispatch_us;
  j["sync_chain_persistent_us"] = chain->persistent_us;
  j["sync_chain_persistent_late_us"] = chain->persistent_late_us;
  j["sync_chain_ok"] = chain->ok;
  j["sync_chain_measure"] =
      "medians of fence-timed replays, per link: x <- W_k x with W_k [n, n] f32 (each link's "
      "weights new to the caches), as one dispatch a link after a barrier, and as one dispatch "
      "of sync_chain_groups workgroups crossing a grid barrier by count between links, loading the "
      "next link's weights before it (_late: after it); ok: the persistent results equal the "
      "dispatch one bit for bit and no spin gave up";
  std::printf("%s\n", j.dump(2).c_str());
  return 0;
}

}  // namespace
}  // namespace infer::bench

int main(int argc, char** argv) {
  int device = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
      device = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: gpu_probes [--device N]\n");
      return 2;
    }
  }
  return infer::bench::run(device);
}
