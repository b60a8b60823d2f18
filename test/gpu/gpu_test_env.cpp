// Shared GPU test contexts and the per-test validation check.
#include "test/gpu/gpu_test_env.h"

#include <dlfcn.h>

#include <cstdlib>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/check.h"
#include "gpu/ops/matvec.h"
#include "model/ops/matmul.h"

namespace infer::gpu {
namespace {

// Debian 12's loader unloads lavapipe, its LLVM and the validation layer when the instance goes;
// LeakSanitizer then cannot name the module of what they leaked and test/sanitizers/lsan.supp
// cannot match it. Pinning them (RTLD_NODELETE) keeps them mapped until exit. Absent libraries
// are fine: this only helps symbolization.
[[maybe_unused]] const bool kDriversPinned = [] {
  for (const char* lib : {"libvulkan.so.1", "libvulkan_lvp.so", "libVkLayer_khronos_validation.so"}) {
    dlopen(lib, RTLD_NOW | RTLD_NODELETE | RTLD_GLOBAL);
  }
  return true;
}();

// The GPU computes with f32 activations (the fixtures' models are narrower than the integer
// dots' threshold); the CPU reference it is compared with must too, even on CPUs whose integer
// kernels quantize activations to Q8_0 (model/ops/matmul.h). test/gpu/matvec_dot_test.cpp tests
// the integer-dot kernels (IntDot::kOn), forward_int_dot_test.cpp a forward on them.
[[maybe_unused]] const bool kCpuF32Activations = [] {
  set_matmul_activations(MatmulActivations::kF32);
  return true;
}();

VulkanContext* make_shared(bool force_staging, std::unique_ptr<VulkanContext>* slot,
                           std::string* saved_error, std::string* error) {
  if (*slot == nullptr && saved_error->empty()) {
    ContextOptions options;
    // Always in CI (lavapipe, Debian's layer). INFER_TEST_NO_VALIDATION is for machines without
    // the layer (the device machine runs these tests on its own driver).
    options.validation = std::getenv("INFER_TEST_NO_VALIDATION") == nullptr;
    options.force_staging = force_staging;
    auto ctx = VulkanContext::create(options);
    if (ctx.ok()) {
      *slot = std::move(ctx).value();
    } else {
      *saved_error = ctx.error().message;
    }
  }
  *error = *saved_error;
  return slot->get();
}

// The shared contexts, and the errors that kept them from being made.
std::unique_ptr<VulkanContext> g_ctx, g_staging_ctx;
std::string g_ctx_error, g_staging_ctx_error;
// What must go before them (before_contexts_release), in registration order.
std::vector<std::function<void()>>& releases() {
  static std::vector<std::function<void()>> r;
  return r;
}

// Destroys the shared contexts when the tests are done, before static destruction: destroyed
// there, after the NVIDIA driver's own teardown, they crashed gpu_test at exit on the H200 (after
// every test had passed).
class ReleaseContexts : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const std::function<void()>& release : releases()) release();
    releases().clear();
    g_ctx.reset();
    g_staging_ctx.reset();
  }
};
[[maybe_unused]] ::testing::Environment* const kReleaseContexts =
    ::testing::AddGlobalTestEnvironment(new ReleaseContexts);

}  // namespace

VulkanContext* shared_context(std::string* error) {
  return make_shared(false, &g_ctx, &g_ctx_error, error);
}

VulkanContext* shared_staging_context(std::string* error) {
  return make_shared(true, &g_staging_ctx, &g_staging_ctx_error, error);
}

void before_contexts_release(std::function<void()> release) {
  releases().push_back(std::move(release));
}

void expect_no_new_validation_errors(const VulkanContext& ctx, int before) {
  const int now = ctx.validation_error_count();
  if (now == before) return;
  std::string all;
  for (const std::string& m : ctx.validation_messages()) all += m + "\n";
  ADD_FAILURE() << (now - before) << " Vulkan validation error(s) during this test:\n" << all;
}

void GpuTest::SetUp() {
  std::string error;
  ctx_ = shared_context(&error);
  ASSERT_NE(ctx_, nullptr) << "no usable Vulkan device: " << error;
  staging_ctx_ = shared_staging_context(&error);
  ASSERT_NE(staging_ctx_, nullptr) << "no usable Vulkan device: " << error;
  errors_before_ = ctx_->validation_error_count();
  staging_errors_before_ = staging_ctx_->validation_error_count();
}

void GpuTest::TearDown() {
  if (ctx_ != nullptr) expect_no_new_validation_errors(*ctx_, errors_before_);
  if (staging_ctx_ != nullptr)
    expect_no_new_validation_errors(*staging_ctx_, staging_errors_before_);
}

ScopedTuning::ScopedTuning(VulkanContext& ctx, std::string_view spec)
    : ctx_(ctx), saved_(ctx.tuning()) {
  auto overrides = parse_gpu_tune(spec);
  INFER_CHECK(overrides.ok(), "%s", overrides.error().message.c_str());
  GpuTuning t = saved_;
  INFER_CHECK(apply_tuning(*overrides, t).ok(), "tuning \"%.*s\"", int(spec.size()), spec.data());
  ctx_.set_tuning(t);
}

}  // namespace infer::gpu
