// Buffer allocation (memory type choice per kind) and staged transfers through one-shot
// command buffers.
#include "gpu/buffer.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <utility>

#include "base/check.h"
#include "gpu/context.h"
#include "gpu/vk_check.h"

namespace infer::gpu {
namespace {

constexpr VkDeviceSize kStagingChunkBytes = VkDeviceSize(64) << 20;

// The first memory type in `allowed` with all of `want`, or -1.
int find_memory_type(const VkPhysicalDeviceMemoryProperties& mem, uint32_t allowed,
                     VkMemoryPropertyFlags want) {
  for (uint32_t i = 0; i < mem.memoryTypeCount; ++i) {
    if ((allowed & (1u << i)) && (mem.memoryTypes[i].propertyFlags & want) == want) return int(i);
  }
  return -1;
}

// Records commands into a fresh command buffer, submits it and waits for it.
Result<void> run_one_shot(const VulkanContext& ctx,
                          const std::function<void(VkCommandBuffer)>& rec) {
  VkDevice dev = ctx.device();
  VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool_info.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  pool_info.queueFamilyIndex = ctx.queue_family();
  VkCommandPool pool = VK_NULL_HANDLE;
  INFER_TRY_VOID(
      vk_check(vkCreateCommandPool(dev, &pool_info, nullptr, &pool), "vkCreateCommandPool"));
  VkFence fence = VK_NULL_HANDLE;
  auto result = [&]() -> Result<void> {
    VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    alloc.commandPool = pool;
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    VkCommandBuffer cb = VK_NULL_HANDLE;
    INFER_TRY_VOID(
        vk_check(vkAllocateCommandBuffers(dev, &alloc, &cb), "vkAllocateCommandBuffers"));
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    INFER_TRY_VOID(vk_check(vkBeginCommandBuffer(cb, &begin), "vkBeginCommandBuffer"));
    rec(cb);
    INFER_TRY_VOID(vk_check(vkEndCommandBuffer(cb), "vkEndCommandBuffer"));
    VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    INFER_TRY_VOID(vk_check(vkCreateFence(dev, &fence_info, nullptr, &fence), "vkCreateFence"));
    VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &cb;
    INFER_TRY_VOID(vk_check(vkQueueSubmit(ctx.queue(), 1, &submit, fence), "vkQueueSubmit"));
    return vk_check(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
  }();
  if (fence != VK_NULL_HANDLE) vkDestroyFence(dev, fence, nullptr);
  vkDestroyCommandPool(dev, pool, nullptr);
  return result;
}

// A copy, then a barrier making its writes visible to every later command and to the host.
void record_copy(VkCommandBuffer cb, VkBuffer src, VkDeviceSize src_offset, VkBuffer dst,
                 VkDeviceSize dst_offset, VkDeviceSize bytes) {
  VkBufferCopy region{src_offset, dst_offset, bytes};
  vkCmdCopyBuffer(cb, src, dst, 1, &region);
  record_make_visible(cb, VK_PIPELINE_STAGE_2_COPY_BIT, VK_ACCESS_2_TRANSFER_WRITE_BIT);
}

}  // namespace

void record_make_visible(VkCommandBuffer cb, VkPipelineStageFlags2 src_stage,
                         VkAccessFlags2 src_access) {
  VkMemoryBarrier2 barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER_2};
  barrier.srcStageMask = src_stage;
  barrier.srcAccessMask = src_access;
  barrier.dstStageMask = VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT | VK_PIPELINE_STAGE_2_HOST_BIT;
  barrier.dstAccessMask =
      VK_ACCESS_2_MEMORY_READ_BIT | VK_ACCESS_2_MEMORY_WRITE_BIT | VK_ACCESS_2_HOST_READ_BIT;
  VkDependencyInfo dep{VK_STRUCTURE_TYPE_DEPENDENCY_INFO};
  dep.memoryBarrierCount = 1;
  dep.pMemoryBarriers = &barrier;
  vkCmdPipelineBarrier2(cb, &dep);
}

Result<Buffer> Buffer::create(const VulkanContext& ctx, VkDeviceSize bytes, BufferKind kind,
                              std::string name) {
  if (bytes == 0)
    return make_error(ErrorCode::kInvalidArgument, "buffer \"" + name + "\": 0 bytes");
  Buffer b;
  b.device_ = ctx.device();
  b.size_ = bytes;
  b.kind_ = kind;
  b.name_ = std::move(name);

  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = bytes;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  INFER_TRY_VOID(vk_check(vkCreateBuffer(b.device_, &info, nullptr, &b.buffer_), "vkCreateBuffer"));
  ctx.set_name(VK_OBJECT_TYPE_BUFFER, uint64_t(b.buffer_), b.name_);

  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(b.device_, b.buffer_, &req);
  const VkMemoryPropertyFlags host =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const VkPhysicalDeviceMemoryProperties& mem = ctx.info().memory;
  int type = -1;
  if (kind == BufferKind::kHost) {
    type = find_memory_type(mem, req.memoryTypeBits, host | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    if (type < 0) type = find_memory_type(mem, req.memoryTypeBits, host);
  } else if (ctx.use_host_visible_device_memory()) {
    type = find_memory_type(mem, req.memoryTypeBits, host | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  }
  if (type < 0 && kind == BufferKind::kDevice) {
    type = find_memory_type(mem, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    if (type < 0) type = find_memory_type(mem, req.memoryTypeBits, 0);
  }
  if (type < 0) {
    return make_error(ErrorCode::kVulkan, "buffer \"" + b.name_ + "\": no suitable memory type");
  }
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = uint32_t(type);
  VkResult r = vkAllocateMemory(b.device_, &alloc, nullptr, &b.memory_);
  if (r != VK_SUCCESS) {
    return make_error(ErrorCode::kVulkan,
                      "buffer \"" + b.name_ + "\" (" + std::to_string(bytes) +
                          " bytes): vkAllocateMemory failed: " + vk_result_name(r));
  }
  INFER_TRY_VOID(
      vk_check(vkBindBufferMemory(b.device_, b.buffer_, b.memory_, 0), "vkBindBufferMemory"));
  // Device buffers are mapped only on UMA, so a forced-staging context really stages.
  const bool map = kind == BufferKind::kHost || ctx.use_host_visible_device_memory();
  if (map && (mem.memoryTypes[type].propertyFlags & host) == host) {
    INFER_TRY_VOID(vk_check(vkMapMemory(b.device_, b.memory_, 0, VK_WHOLE_SIZE, 0, &b.mapped_),
                            "vkMapMemory"));
  }
  return b;
}

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& other) noexcept { *this = std::move(other); }

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    device_ = std::exchange(other.device_, VK_NULL_HANDLE);
    buffer_ = std::exchange(other.buffer_, VK_NULL_HANDLE);
    memory_ = std::exchange(other.memory_, VK_NULL_HANDLE);
    size_ = std::exchange(other.size_, 0);
    kind_ = other.kind_;
    mapped_ = std::exchange(other.mapped_, nullptr);
    name_ = std::move(other.name_);
  }
  return *this;
}

void Buffer::release() {
  if (buffer_ != VK_NULL_HANDLE) vkDestroyBuffer(device_, buffer_, nullptr);
  if (memory_ != VK_NULL_HANDLE) vkFreeMemory(device_, memory_, nullptr);  // also unmaps
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  mapped_ = nullptr;
}

Result<void> upload(const VulkanContext& ctx, Buffer& dst, VkDeviceSize offset, const void* src,
                    size_t bytes) {
  INFER_CHECK(offset + bytes <= dst.size(), "upload of %zu bytes at %llu into \"%s\" (%llu bytes)",
              bytes, (unsigned long long)offset, dst.name().c_str(),
              (unsigned long long)dst.size());
  if (bytes == 0) return Ok{};
  if (dst.mapped() != nullptr) {
    std::memcpy(static_cast<uint8_t*>(dst.mapped()) + offset, src, bytes);
    return Ok{};
  }
  const VkDeviceSize chunk = std::min<VkDeviceSize>(bytes, kStagingChunkBytes);
  INFER_TRY(Buffer staging, Buffer::create(ctx, chunk, BufferKind::kHost, "staging upload"));
  for (VkDeviceSize done = 0; done < bytes; done += chunk) {
    const VkDeviceSize n = std::min<VkDeviceSize>(chunk, bytes - done);
    std::memcpy(staging.mapped(), static_cast<const uint8_t*>(src) + done, n);
    INFER_TRY_VOID(run_one_shot(ctx, [&](VkCommandBuffer cb) {
      record_copy(cb, staging.handle(), 0, dst.handle(), offset + done, n);
    }));
  }
  return Ok{};
}

Result<void> download_gather(const VulkanContext& ctx, std::span<const GatherRegion> regions,
                             void* dst, size_t dst_bytes) {
  for (const GatherRegion& r : regions) {
    INFER_CHECK(r.src_offset + r.bytes <= r.src->size() && r.dst_offset + r.bytes <= dst_bytes,
                "gather of %zu bytes at %llu from \"%s\" (%llu) to %zu of %zu", r.bytes,
                (unsigned long long)r.src_offset, r.src->name().c_str(),
                (unsigned long long)r.src->size(), r.dst_offset, dst_bytes);
  }
  if (dst_bytes == 0 || regions.empty()) return Ok{};
  INFER_TRY_VOID(vk_check(vkQueueWaitIdle(ctx.queue()), "vkQueueWaitIdle"));
  INFER_TRY(Buffer staging, Buffer::create(ctx, dst_bytes, BufferKind::kHost, "staging gather"));
  INFER_TRY_VOID(run_one_shot(ctx, [&](VkCommandBuffer cb) {
    for (const GatherRegion& r : regions) {
      if (r.bytes == 0) continue;
      const VkBufferCopy region{r.src_offset, r.dst_offset, r.bytes};
      vkCmdCopyBuffer(cb, r.src->handle(), staging.handle(), 1, &region);
    }
    record_make_visible(cb, VK_PIPELINE_STAGE_2_COPY_BIT, VK_ACCESS_2_TRANSFER_WRITE_BIT);
  }));
  std::memcpy(dst, staging.mapped(), dst_bytes);
  return Ok{};
}

Result<void> fill(const VulkanContext& ctx, Buffer& dst, uint32_t word) {
  return run_one_shot(ctx, [&](VkCommandBuffer cb) {
    vkCmdFillBuffer(cb, dst.handle(), 0, VK_WHOLE_SIZE, word);
    record_make_visible(cb, VK_PIPELINE_STAGE_2_CLEAR_BIT, VK_ACCESS_2_TRANSFER_WRITE_BIT);
  });
}

Result<void> download(const VulkanContext& ctx, const Buffer& src, VkDeviceSize offset, void* dst,
                      size_t bytes) {
  INFER_CHECK(offset + bytes <= src.size(), "download of %zu bytes at %llu from \"%s\" (%llu)",
              bytes, (unsigned long long)offset, src.name().c_str(),
              (unsigned long long)src.size());
  if (bytes == 0) return Ok{};
  INFER_TRY_VOID(vk_check(vkQueueWaitIdle(ctx.queue()), "vkQueueWaitIdle"));
  if (src.mapped() != nullptr) {
    std::memcpy(dst, static_cast<const uint8_t*>(src.mapped()) + offset, bytes);
    return Ok{};
  }
  const VkDeviceSize chunk = std::min<VkDeviceSize>(bytes, kStagingChunkBytes);
  INFER_TRY(Buffer staging, Buffer::create(ctx, chunk, BufferKind::kHost, "staging download"));
  for (VkDeviceSize done = 0; done < bytes; done += chunk) {
    const VkDeviceSize n = std::min<VkDeviceSize>(chunk, bytes - done);
    INFER_TRY_VOID(run_one_shot(ctx, [&](VkCommandBuffer cb) {
      record_copy(cb, src.handle(), offset + done, staging.handle(), 0, n);
    }));
    std::memcpy(static_cast<uint8_t*>(dst) + done, staging.mapped(), n);
  }
  return Ok{};
}

}  // namespace infer::gpu
