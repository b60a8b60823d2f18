// Limits that protect the machine: before the KV cache is allocated, its size for this model is
// compared with the memory there is (MemAvailable on the CPU, the device-local heap with --gpu)
// and a context that cannot fit is refused with the figures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "gpu/context.h"
#include "model/config.h"
#include "model/kv_ring.h"

namespace infer::cli {

// MemAvailable of a /proc/meminfo text, in bytes; nullopt when absent.
std::optional<size_t> parse_mem_available(std::string_view meminfo);
// 16001056 -> "16,001,056".
std::string with_commas(int64_t n);
// Bytes the GPU forward's KV rings take on the device (gpu/gpu_kv.cpp's arithmetic).
size_t gpu_kv_bytes(const ModelConfig& cfg, int64_t max_positions, int64_t max_chunk,
                    const std::optional<RingConfig>& ring);

// kUnsupported (exit 1) when the context (the ring's anchors + window + recall, else a fixed
// cache of max_positions) needs more than `available` bytes; `where` names the memory ("this
// machine has 22.9 GB available").
Result<void> check_fits(int64_t positions, bool ring, size_t need, size_t available,
                        std::string_view where);
// The check for this run: the CPU forward's context against MemAvailable, or with `gpu` the
// device KV against the largest device-local heap.
Result<void> check_context_memory(const ModelConfig& cfg, const std::optional<RingConfig>& ring,
                                  int64_t max_positions, const gpu::VulkanContext* gpu);

}  // namespace infer::cli
