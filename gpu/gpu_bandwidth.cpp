// Device copy bandwidth: two device buffers, one recorded copy replayed per pass.
#include "gpu/gpu_bandwidth.h"

#include <algorithm>

#include "gpu/buffer.h"
#include "gpu/context.h"
#include "gpu/recorder.h"

namespace infer::gpu {

Result<CopyBandwidth> measure_copy_bandwidth(const VulkanContext& ctx, size_t bytes, int passes) {
  const VkPhysicalDeviceMemoryProperties& mem = ctx.info().memory;
  VkDeviceSize largest = 0;
  for (uint32_t i = 0; i < mem.memoryHeapCount; ++i) {
    if (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
      largest = std::max(largest, mem.memoryHeaps[i].size);
    }
  }
  // Two buffers of a quarter each leave room for the model; 64 MiB at least to leave the caches.
  const size_t n = std::max<size_t>(std::min<size_t>(bytes, size_t(largest / 4)), size_t(64) << 20);
  INFER_TRY(Buffer src, Buffer::create(ctx, n, BufferKind::kDevice, "bandwidth src"));
  INFER_TRY(Buffer dst, Buffer::create(ctx, n, BufferKind::kDevice, "bandwidth dst"));
  INFER_TRY(std::unique_ptr<Recorder> rec, Recorder::create(ctx));
  INFER_TRY_VOID(rec->begin(/*reusable=*/true));
  rec->copy(src, 0, dst, 0, n);
  INFER_TRY_VOID(rec->end());
  INFER_TRY_VOID(rec->submit_and_wait());  // warm-up: first touch of the pages

  CopyBandwidth bw;
  bw.copy_bytes = n;
  for (int i = 0; i < passes; ++i) {
    INFER_TRY_VOID(rec->submit_and_wait());
    const double s = rec->last_timing().submit_s + rec->last_timing().wait_s;
    bw.passes_gb_per_s.push_back(s > 0 ? 2.0 * double(n) / s / 1e9 : 0.0);
  }
  std::vector<double> sorted = bw.passes_gb_per_s;
  std::sort(sorted.begin(), sorted.end());
  if (!sorted.empty()) {
    bw.best_gb_per_s = sorted.back();
    bw.median_gb_per_s = sorted[sorted.size() / 2];
  }
  return bw;
}

}  // namespace infer::gpu
