// VulkanContext: device choice, the report, the validation layer being live, error paths.
#include "gpu/context.h"

#include <initializer_list>
#include <string>
#include <utility>

#include "gpu/vk_check.h"
#include "test/gpu/gpu_test_env.h"

namespace infer::gpu {
namespace {

using GpuContext = GpuTest;

TEST_F(GpuContext, ReportsADeviceAndASubgroupSize) {
  const DeviceInfo& info = ctx_->info();
  EXPECT_FALSE(info.name.empty());
  EXPECT_GE(info.subgroup_size, 1u);
  EXPECT_LE(info.min_subgroup_size, info.subgroup_size);
  EXPECT_GE(info.max_subgroup_size, info.subgroup_size);
  EXPECT_GE(info.api_version, VK_API_VERSION_1_3);
  const std::string report = ctx_->report();
  EXPECT_NE(report.find(info.name), std::string::npos) << report;
  EXPECT_NE(report.find("subgroup size: " + std::to_string(info.subgroup_size)), std::string::npos)
      << report;
  EXPECT_NE(report.find("uma: "), std::string::npos) << report;
  std::printf("%s", report.c_str());
}

TEST_F(GpuContext, HasValidationOnAndStagingForcedWhenAsked) {
  EXPECT_TRUE(ctx_->validation_enabled());
  EXPECT_TRUE(staging_ctx_->validation_enabled());
  EXPECT_EQ(ctx_->use_host_visible_device_memory(), ctx_->info().uma);
  EXPECT_FALSE(staging_ctx_->use_host_visible_device_memory());
}

// Memory maps as the machine's kinds show it: an APU's one heap, a discrete GPU with resizable BAR
// (its big heap also host-visible) and one without (a 256 MiB host-visible window beside the big
// heap, the H200 as the device machine once showed it: weights there failed to allocate).
TEST(GpuMemoryKinds, HostMapsDeviceMemoryOnlyOnTheLargestDeviceHeap) {
  constexpr VkMemoryPropertyFlags kLocal = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  constexpr VkMemoryPropertyFlags kHost =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  constexpr VkDeviceSize kGiB = VkDeviceSize(1) << 30;
  auto heaps = [](std::initializer_list<VkDeviceSize> sizes,
                  std::initializer_list<std::pair<VkMemoryPropertyFlags, uint32_t>> types) {
    VkPhysicalDeviceMemoryProperties m{};
    for (VkDeviceSize s : sizes) {
      // Heaps given as a size are device-local; 0 marks the host heap (64 GiB).
      m.memoryHeaps[m.memoryHeapCount].size = s != 0 ? s : 64 * kGiB;
      m.memoryHeaps[m.memoryHeapCount++].flags = s != 0 ? VK_MEMORY_HEAP_DEVICE_LOCAL_BIT : 0;
    }
    for (const auto& [flags, heap] : types) {
      m.memoryTypes[m.memoryTypeCount].propertyFlags = flags;
      m.memoryTypes[m.memoryTypeCount++].heapIndex = heap;
    }
    return m;
  };
  const auto apu = heaps({16 * kGiB}, {{kLocal, 0}, {kLocal | kHost, 0}});
  const auto rebar = heaps({140 * kGiB, 0}, {{kLocal, 0}, {kLocal | kHost, 0}, {kHost, 1}});
  const auto small_bar =
      heaps({140 * kGiB, 0, 256 << 20}, {{kLocal, 0}, {kHost, 1}, {kLocal | kHost, 2}});
  const auto no_window = heaps({8 * kGiB, 0}, {{kLocal, 0}, {kHost, 1}});
  EXPECT_TRUE(host_maps_device_memory(apu));
  EXPECT_TRUE(host_maps_device_memory(rebar));
  EXPECT_FALSE(host_maps_device_memory(small_bar));
  EXPECT_FALSE(host_maps_device_memory(no_window));
}

// The layer must be live, not just requested: a buffer with no usage flags breaks
// VUID-VkBufferCreateInfo-usage-requiredbitmask and has to be counted. Uses its own context so
// the shared ones stay clean.
TEST(GpuValidation, CountsAnErrorTheLayerReports) {
  ContextOptions options;
  options.validation = true;
  auto ctx = VulkanContext::create(options);
  ASSERT_TRUE(ctx.ok()) << ctx.error().message;
  EXPECT_EQ((*ctx)->validation_error_count(), 0);
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = 64;
  info.usage = 0;
  VkBuffer buffer = VK_NULL_HANDLE;
  const VkResult r = vkCreateBuffer((*ctx)->device(), &info, nullptr, &buffer);
  if (r == VK_SUCCESS) vkDestroyBuffer((*ctx)->device(), buffer, nullptr);
  EXPECT_GE((*ctx)->validation_error_count(), 1);
  ASSERT_FALSE((*ctx)->validation_messages().empty());
  EXPECT_NE((*ctx)->validation_messages()[0].find("usage"), std::string::npos);
}

// Pipeline statistics (--profile) only where asked, and then wherever the driver offers them.
TEST_F(GpuContext, PipelineStatisticsOnlyWhenAsked) {
  EXPECT_FALSE(ctx_->info().pipeline_stats);
  ContextOptions options;
  options.pipeline_stats = true;
  auto ctx = VulkanContext::create(options);
  ASSERT_TRUE(ctx.ok()) << ctx.error().message;
  EXPECT_EQ((*ctx)->info().pipeline_stats,
            has_device_extension((*ctx)->physical_device(),
                                 VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME));
}

TEST(GpuValidation, RejectsADeviceIndexOutOfRange) {
  ContextOptions options;
  options.device_index = 1000;
  auto ctx = VulkanContext::create(options);
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.error().code, ErrorCode::kVulkan);
  EXPECT_NE(ctx.error().message.find("out of range"), std::string::npos) << ctx.error().message;
}

TEST(GpuVkCheck, TurnsAFailureIntoAnErrorNamingTheCall) {
  EXPECT_TRUE(vk_check(VK_SUCCESS, "vkCreateBuffer").ok());
  const Result<void> r = vk_check(VK_ERROR_OUT_OF_DEVICE_MEMORY, "vkAllocateMemory");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kVulkan);
  EXPECT_EQ(r.error().message, "vkAllocateMemory failed: VK_ERROR_OUT_OF_DEVICE_MEMORY");
}

}  // namespace
}  // namespace infer::gpu
