// Backend choice for the CLI: CpuForward, or a VulkanContext and GpuForward.
#include "cli/backend.h"

#include <cstdio>

#include "model/cpu_forward.h"

namespace infer::cli {

Result<std::unique_ptr<gpu::VulkanContext>> open_gpu(const Options& opts) {
  if (!opts.gpu) return std::unique_ptr<gpu::VulkanContext>();
  gpu::ContextOptions options;
  options.device_index = opts.device.value_or(-1);
  INFER_TRY(std::unique_ptr<gpu::VulkanContext> ctx, gpu::VulkanContext::create(options));
  const std::string report = ctx->report();
  std::fprintf(stderr, "%s%s", report.c_str(),
               report.empty() || report.back() != '\n' ? "\n" : "");
  return ctx;
}

Result<Backend> make_backend(std::unique_ptr<gpu::VulkanContext> ctx, const Model& model,
                             ThreadPool& pool, int64_t max_positions) {
  Backend b;
  if (ctx == nullptr) {
    b.forward = std::make_unique<CpuForward>(model, pool, max_positions);
    b.name = "cpu";
    return b;
  }
  b.ctx = std::move(ctx);
  INFER_TRY(std::unique_ptr<gpu::GpuForward> f,
            gpu::GpuForward::create(*b.ctx, model, pool, max_positions));
  b.gpu = f.get();
  b.forward = std::move(f);
  b.name = "vulkan";
  return b;
}

}  // namespace infer::cli
