// VulkanContext: device choice, the report, the validation layer being live, error paths.
#include "gpu/context.h"

#include <string>

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
