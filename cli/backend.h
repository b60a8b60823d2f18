// The forward pass the options ask for: the CPU path, or (--gpu) the Vulkan one on the chosen
// device, whose report goes to stderr first. Generation and the bench drive either through
// the Forward interface.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/result.h"
#include "cli/options.h"
#include "gpu/context.h"
#include "gpu/gpu_forward.h"
#include "model/forward.h"
#include "model/kv_ring.h"
#include "model/model.h"

namespace infer::cli {

struct Backend {
  std::unique_ptr<gpu::VulkanContext> ctx;  // --gpu only; declared first, so destroyed last
  std::unique_ptr<Forward> forward;
  gpu::GpuForward* gpu = nullptr;  // `forward` itself when on the GPU, else nullptr
  std::string name;                // "cpu" or "vulkan"
};

// The Vulkan context of --gpu/--device N (report printed to stderr), or nullptr without --gpu.
Result<std::unique_ptr<gpu::VulkanContext>> open_gpu(const Options& opts);

// The KV ring (the default; --anchors/--window/--recall/--evict change its parts), or with
// --no-ring nullopt: the exact model with a cache bounded by the context length.
Result<std::optional<RingConfig>> ring_config(const Options& opts);

// A forward pass of `model` for streams of max_positions, on `ctx` when given, else the CPU;
// with `ring`, an endless stream in the KV ring instead.
Result<Backend> make_backend(std::unique_ptr<gpu::VulkanContext> ctx, const Model& model,
                             ThreadPool& pool, int64_t max_positions,
                             const std::optional<RingConfig>& ring = std::nullopt);

// --quiescence [--quiescence-threshold T] on the CPU or GPU backend (DESIGN.md §6); nothing
// without --quiescence.
Result<void> apply_quiescence(const Options& opts, Backend& backend);

}  // namespace infer::cli
