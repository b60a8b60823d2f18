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
  INFER_TRY(std::unique_ptr<gpu::VulkanContext> ctx, gpu::VulkanContext::create(options));
  const std::string report = ctx->report();
  std::fprintf(stderr, "%s%s", report.c_str(),
               report.empty() || report.back() != '\n' ? "\n" : "");
  return ctx;
}

Result<std::optional<RingConfig>> ring_config(const Options& opts) {
  if (!opts.anchors && !opts.window && !opts.recall && !opts.evict) {
    return std::optional<RingConfig>();
  }
  RingConfig c;
  c.anchors = opts.anchors.value_or(c.anchors);
  c.window = opts.window.value_or(c.window);
  c.recall = opts.recall.value_or(c.recall);
  c.evict = opts.evict.value_or(c.evict);
  INFER_TRY_VOID(validate(c));
  return std::optional<RingConfig>(c);
}

namespace {

// Tokens a prefill chunk: the device's (gpu::default_prefill_chunk), or INFER_PREFILL_CHUNK (a
// measurement knob: a bigger chunk fills a big GPU's grids better, holds bigger activation
// buffers and delays what waits behind it).
Result<int64_t> prefill_chunk(const gpu::VulkanContext& ctx) {
  const char* v = std::getenv("INFER_PREFILL_CHUNK");
  if (v == nullptr) return gpu::default_prefill_chunk(ctx);
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0' || n < 1 || n > 65536) {
    return make_error(ErrorCode::kInvalidArgument,
                      std::string("INFER_PREFILL_CHUNK=\"") + v + "\": expected 1..65536 tokens");
  }
  return int64_t(n);
}

}  // namespace

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
  INFER_TRY(const int64_t chunk, prefill_chunk(*b.ctx));
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
