// The KV memory check of memory_check.h: sizes from model/context_memory.h and the GPU's ring
// arithmetic, availability from /proc/meminfo or the Vulkan heaps.
#include "cli/memory_check.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "gpu/gpu_forward.h"
#include "gpu/gpu_kv.h"
#include "model/context_memory.h"

namespace infer::cli {
namespace {

// "61.0 GB", "512.3 MB" (decimal units, as the message's readers compare with free(1) -h).
std::string human(size_t bytes) {
  char buf[32];
  if (bytes >= size_t(1e9))
    std::snprintf(buf, sizeof buf, "%.1f GB", double(bytes) / 1e9);
  else
    std::snprintf(buf, sizeof buf, "%.1f MB", double(bytes) / 1e6);
  return buf;
}

}  // namespace

std::optional<size_t> parse_mem_available(std::string_view meminfo) {
  const size_t at = meminfo.find("MemAvailable:");
  if (at == std::string_view::npos) return std::nullopt;
  std::istringstream in(std::string(meminfo.substr(at + 13)));
  size_t kb = 0;
  std::string unit;
  if (!(in >> kb >> unit) || unit != "kB") return std::nullopt;
  return kb * 1024;
}

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

size_t gpu_kv_bytes(const ModelConfig& cfg, int64_t max_positions, int64_t max_chunk,
                    const std::optional<RingConfig>& ring) {
  // As GpuForward::create: with the ring the bound is max(A + W + R, sliding_window) + chunk.
  const int64_t tiered = ring ? ring->anchors + ring->window + ring->recall : 0;
  const int64_t chunk = ring ? std::min(max_chunk, ring->window) : max_chunk;
  const int64_t bound =
      ring ? std::max<int64_t>(tiered, cfg.text.sliding_window) + chunk : max_positions;
  const int64_t C = std::min(chunk, bound);
  size_t bytes = 0;
  for (const LayerPlan& p : cfg.layers) {
    if (p.kv_shared) continue;
    const bool is_tiered = tiered > 0 && p.type != LayerType::kSliding;
    const int64_t rows = is_tiered ? tiered + C : gpu::kv_ring_slots(cfg, p.type, bound, C);
    bytes += 2 * size_t(rows) * size_t(p.num_key_value_heads) * size_t(p.head_dim) * sizeof(float);
  }
  return bytes;
}

Result<void> check_fits(int64_t positions, bool ring, size_t need, size_t available,
                        std::string_view where) {
  if (need <= available) return Ok{};
  return make_error(ErrorCode::kUnsupported,
                    std::string(ring ? "a KV ring of " : "a KV cache of ") +
                        with_commas(positions) + " positions needs " + human(need) +
                        " for this model; " + std::string(where) + " " + human(available) +
                        (ring ? " available (lower --window/--anchors)" : " available"));
}

Result<void> check_context_memory(const ModelConfig& cfg, const std::optional<RingConfig>& ring,
                                  int64_t max_positions, const gpu::VulkanContext* gpu) {
  const int64_t positions = ring ? ring->anchors + ring->window + ring->recall : max_positions;
  if (gpu != nullptr) {
    VkDeviceSize heap = 0;  // the largest device-local heap: where the rings go
    const VkPhysicalDeviceMemoryProperties& mem = gpu->info().memory;
    for (uint32_t i = 0; i < mem.memoryHeapCount; ++i) {
      if (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
        heap = std::max(heap, mem.memoryHeaps[i].size);
      }
    }
    const size_t need = gpu_kv_bytes(cfg, max_positions, gpu::default_prefill_chunk(*gpu), ring);
    if (heap > 0) INFER_TRY_VOID(check_fits(positions, bool(ring), need, heap, "the device has"));
  }
  std::ifstream in("/proc/meminfo");
  std::stringstream text;
  text << in.rdbuf();
  const std::optional<size_t> available = parse_mem_available(text.str());
  if (!available) return Ok{};  // no figure to check against (not Linux): nothing refused
  // On the GPU the host keeps only the ring's bookkeeping; the CPU holds the whole context.
  const ContextBytes host =
      cpu_context_bytes(cfg, max_positions, ring ? &*ring : nullptr);
  const size_t need = gpu != nullptr ? host.bookkeeping : host.total();
  return check_fits(positions, bool(ring), need, *available, "this machine has");
}

}  // namespace infer::cli
