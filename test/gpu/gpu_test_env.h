// Shared GPU test fixture: one validated VulkanContext per process (and one that forces staged
// transfers), and a check after every test that the validation layer reported no error.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string_view>

#include "gpu/context.h"

namespace infer::gpu {

// The shared contexts, created on first use with validation on; nullptr (and a message in
// *error) when there is no usable Vulkan device, which the fixture turns into a failure.
VulkanContext* shared_context(std::string* error);
VulkanContext* shared_staging_context(std::string* error);
// Registers `release` to run when the tests are done, before the shared contexts are destroyed:
// for caches of GPU objects made on them, which must go first.
void before_contexts_release(std::function<void()> release);

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  VulkanContext* ctx_ = nullptr;          // UMA path where the device offers it
  VulkanContext* staging_ctx_ = nullptr;  // always staged uploads and downloads

 private:
  int errors_before_ = 0;
  int staging_errors_before_ = 0;
};

// ctx's tuning with --gpu-tune's overrides (spec "key=value,...", gpu/tuning.h) for a scope:
// kernels made inside it take them. Restores the tuning it found.
class ScopedTuning {
 public:
  ScopedTuning(VulkanContext& ctx, std::string_view spec);
  ~ScopedTuning() { ctx_.set_tuning(saved_); }
  ScopedTuning(const ScopedTuning&) = delete;
  ScopedTuning& operator=(const ScopedTuning&) = delete;

 private:
  VulkanContext& ctx_;
  GpuTuning saved_;
};

// Fails the current test if `ctx` saw validation errors beyond `before`, listing them.
void expect_no_new_validation_errors(const VulkanContext& ctx, int before);

}  // namespace infer::gpu
