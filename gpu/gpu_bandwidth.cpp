// Device bandwidth: a streaming read by compute shader (the bound decode is measured against)
// and a buffer-to-buffer copy, each one recording replayed per timed pass.
#include "gpu/gpu_bandwidth.h"

#include <algorithm>
#include <memory>
#include <string>

#include "gpu/buffer.h"
#include "gpu/context.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"

namespace infer::gpu {
namespace {

VkDeviceSize largest_device_heap(const VulkanContext& ctx) {
  const VkPhysicalDeviceMemoryProperties& mem = ctx.info().memory;
  VkDeviceSize largest = 0;
  for (uint32_t i = 0; i < mem.memoryHeapCount; ++i) {
    if (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
      largest = std::max(largest, mem.memoryHeaps[i].size);
    }
  }
  return largest;
}

// GB/s of each timed replay of `rec` (replay_seconds), each of which moved `bytes`.
Result<std::vector<double>> timed_passes(Recorder& rec, double bytes, int passes) {
  INFER_TRY(const std::vector<double> seconds, replay_seconds(rec, passes));
  std::vector<double> gb_per_s;
  for (const double s : seconds) gb_per_s.push_back(s > 0 ? bytes / s / 1e9 : 0.0);
  return gb_per_s;
}

// Best and median of the passes.
void summarise(const std::vector<double>& passes, double& best, double& median) {
  std::vector<double> sorted = passes;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.empty()) return;
  best = sorted.back();
  median = sorted[sorted.size() / 2];
}

constexpr uint32_t kReadLocalSize = 256;
constexpr uint32_t kReadUvec4PerInvocation = 16;  // grid sized so each lane reads ~this many
constexpr uint32_t kReadMaxGroups = 65535;

}  // namespace

Result<std::vector<double>> replay_seconds(Recorder& rec, int passes) {
  INFER_TRY_VOID(rec.submit_and_wait());  // warm-up: first touch of the pages
  std::vector<double> seconds;
  for (int i = 0; i < passes; ++i) {
    INFER_TRY_VOID(rec.submit_and_wait());
    seconds.push_back(rec.last_timing().submit_s + rec.last_timing().wait_s);
  }
  return seconds;
}

Result<double> replay_median_seconds(Recorder& rec, int passes) {
  INFER_TRY(std::vector<double> s, replay_seconds(rec, passes));
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

Result<ReadBandwidth> measure_device_read_bandwidth(const VulkanContext& ctx, size_t bytes,
                                                    int passes, int sweeps) {
  const size_t n = std::min<size_t>(bytes, size_t(largest_device_heap(ctx) / 4)) / 16 * 16;
  if (n == 0 || passes < 1 || sweeps < 1) {
    return make_error(ErrorCode::kInvalidArgument,
                      "read bandwidth: " + std::to_string(n) + " bytes, " +
                          std::to_string(passes) + " passes, " + std::to_string(sweeps) +
                          " sweeps");
  }
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(ctx.physical_device(), &props);
  // A binding reaches at most maxStorageBufferRange bytes: bind the buffer in whole-MiB pieces
  // (aligned for any minStorageBufferOffsetAlignment), one dispatch each.
  const size_t piece = std::min<size_t>(
      n, std::max<size_t>(size_t(1) << 20, size_t(props.limits.maxStorageBufferRange) >> 20 << 20));
  const uint32_t local = std::min(kReadLocalSize, ctx.info().max_workgroup_invocations);
  const uint32_t max_groups = std::min(kReadMaxGroups, ctx.info().max_workgroup_count[0]);

  PipelineDesc desc;
  desc.variant = "read_bandwidth";
  desc.bindings = {Access::kRead, Access::kWrite};
  desc.push_bytes = sizeof(uint32_t);
  desc.spec = {{0, local}};
  INFER_TRY(std::unique_ptr<Pipeline> pipeline, Pipeline::create(ctx, desc));
  INFER_TRY(Buffer src, Buffer::create(ctx, n, BufferKind::kDevice, "read bandwidth src"));
  INFER_TRY(Buffer out, Buffer::create(ctx, size_t(max_groups) * sizeof(uint32_t),
                                       BufferKind::kDevice, "read bandwidth out"));
  INFER_TRY(std::unique_ptr<Recorder> rec, Recorder::create(ctx));
  INFER_TRY_VOID(rec->begin(/*reusable=*/true));
  for (int s = 0; s < sweeps; ++s) {
    for (size_t off = 0; off < n; off += piece) {
      const size_t len = std::min(piece, n - off);
      const uint32_t n_uvec4 = uint32_t(len / 16);
      const uint32_t groups = std::clamp<uint32_t>(
          n_uvec4 / (local * kReadUvec4PerInvocation), 1u, max_groups);
      INFER_TRY_VOID(rec->dispatch(*pipeline, {Binding{&src, off, len}, Binding{&out}}, n_uvec4,
                                   Groups{groups, 1, 1}));
    }
  }
  INFER_TRY_VOID(rec->end());
  ReadBandwidth bw;
  bw.buffer_bytes = n;
  bw.sweeps_per_pass = sweeps;
  INFER_TRY(bw.passes_gb_per_s, timed_passes(*rec, double(n) * sweeps, passes));
  summarise(bw.passes_gb_per_s, bw.best_gb_per_s, bw.median_gb_per_s);
  return bw;
}

Result<CopyBandwidth> measure_copy_bandwidth(const VulkanContext& ctx, size_t bytes, int passes) {
  // Two buffers of a quarter each leave room for the model; 64 MiB at least to leave the caches.
  const size_t n = std::max<size_t>(
      std::min<size_t>(bytes, size_t(largest_device_heap(ctx) / 4)), size_t(64) << 20);
  INFER_TRY(Buffer src, Buffer::create(ctx, n, BufferKind::kDevice, "bandwidth src"));
  INFER_TRY(Buffer dst, Buffer::create(ctx, n, BufferKind::kDevice, "bandwidth dst"));
  INFER_TRY(std::unique_ptr<Recorder> rec, Recorder::create(ctx));
  INFER_TRY_VOID(rec->begin(/*reusable=*/true));
  rec->copy(src, 0, dst, 0, n);
  INFER_TRY_VOID(rec->end());

  CopyBandwidth bw;
  bw.copy_bytes = n;
  INFER_TRY(bw.passes_gb_per_s, timed_passes(*rec, 2.0 * double(n), passes));
  summarise(bw.passes_gb_per_s, bw.best_gb_per_s, bw.median_gb_per_s);
  return bw;
}

}  // namespace infer::gpu
