// Backend choice for the CLI: CpuForward, or a VulkanContext and GpuForward.
#include "cli/backend.h"

#include <cstdio>
#include <cstdlib>

#include "model/cpu_forward.h"
#include "model/quiescence.h"

namespace infer::cli {

Result<std::unique_ptr<gpu::VulkanContext>> open_gpu(const Options& opts) {
  if (!opts.gpu) return std::unique_ptr<gpu::VulkanContext>();
  gpu::ContextOptions options;
  options.device_index = opts.device.value_or(-1);
  options.tuning = opts.gpu_tune;
  options.pipeline_stats = opts.profile;
  if (opts.prefill_chunk) {
    options.tuning.emplace_back("prefill_chunk", std::to_string(*opts.prefill_chunk));
  }
  INFER_TRY(std::unique_ptr<gpu::VulkanContext> ctx, gpu::VulkanContext::create(options));
  const std::string report = ctx->report();
  std::fprintf(stderr, "%s%s", report.c_str(),
               report.empty() || report.back() != '\n' ? "\n" : "");
  // A CPU rasterizer (Mesa's llvmpipe) is picked only when no GPU is usable: it is correct but
  // slower than the CPU backend, which is what the user most likely wants.
  if (ctx->info().type == VK_PHYSICAL_DEVICE_TYPE_CPU) {
    std::fprintf(stderr,
                 "infer: %s is a CPU rasterizer, not a GPU%s: --gpu will be slower than the CPU "
                 "backend (run without --gpu)\n",
                 ctx->info().name.c_str(),
                 opts.device ? "" : ", and the only Vulkan device here");
  }
  return ctx;
}

Result<std::optional<RingConfig>> ring_config(const Options& opts) {
  if (opts.no_ring) return std::optional<RingConfig>();
  RingConfig c;
  c.anchors = opts.anchors.value_or(c.anchors);
  c.window = opts.window.value_or(c.window);
  c.recall = opts.recall.value_or(c.recall);
  c.evict = opts.evict.value_or(c.evict);
  INFER_TRY_VOID(validate(c));
  return std::optional<RingConfig>(c);
}

Result<Backend> make_backend(std::unique_ptr<gpu::VulkanContext> ctx, const Model& model,
                             ThreadPool& pool, int64_t max_positions,
                             const std::optional<RingConfig>& ring) {
  Backend b;
  if (ctx == nullptr) {
    b.forward = ring ? std::make_unique<CpuForward>(model, pool, *ring)
                     : std::make_unique<CpuForward>(model, pool, max_positions);
    b.name = "cpu";
    return b;
  }
  b.ctx = std::move(ctx);
  const int64_t chunk = gpu::default_prefill_chunk(*b.ctx);  // the tuning's prefill_chunk
  INFER_TRY(std::unique_ptr<gpu::GpuForward> f,
            ring ? gpu::GpuForward::create(*b.ctx, model, pool, *ring, chunk)
                 : gpu::GpuForward::create(*b.ctx, model, pool, max_positions, chunk));
  b.gpu = f.get();
  b.forward = std::move(f);
  b.name = "vulkan";
  return b;
}

Result<void> apply_quiescence(const Options& opts, Backend& backend) {
  if (!opts.quiescence) return Ok{};
  QuiescenceConfig q;
  q.threshold = opts.quiescence_threshold.value_or(q.threshold);
  // The GPU takes the same decisions with the same Quiescence (gpu/gpu_forward_quiescence.cpp).
  if (backend.gpu != nullptr) return backend.gpu->set_quiescence(&q);
  auto* cpu = dynamic_cast<CpuForward*>(backend.forward.get());
  if (cpu != nullptr) cpu->set_quiescence(&q);
  return Ok{};
}

}  // namespace infer::cli
