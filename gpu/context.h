// VulkanContext: the Vulkan 1.3 instance, the chosen physical device, one compute queue and the
// optional validation messenger. Everything else in gpu/ borrows its handles.
#pragma once

#include <volk.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/result.h"
#include "gpu/tuning.h"

namespace infer::gpu {

struct ContextOptions {
  int device_index = -1;       // -1: the first discrete or integrated GPU, else any device
  bool validation = false;     // enable VK_LAYER_KHRONOS_validation and count its errors
  bool force_staging = false;  // treat the device as discrete even on UMA (tests the staged path)
  TuningOverrides tuning;      // --gpu-tune, applied over the device's defaults
  // VK_KHR_pipeline_executable_properties where offered (--profile): each pipeline's statistics.
  bool pipeline_stats = false;
};

// What the backend needs to know about the device, read once at creation.
struct DeviceInfo {
  std::string name;
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  std::string driver_name;  // e.g. "llvmpipe"
  std::string driver_info;  // e.g. "Mesa 22.3.6 (LLVM 15.0.6)"
  uint32_t api_version = 0;
  uint32_t subgroup_size = 0;      // the default size of a compute subgroup
  uint32_t min_subgroup_size = 0;  // VK_EXT_subgroup_size_control range (core in 1.3)
  uint32_t max_subgroup_size = 0;
  bool compute_required_subgroup_size = false;  // subgroupSizeControl on, compute settable
  bool compute_full_subgroups = false;          // computeFullSubgroups on
  // SMs / CUs where the driver says (VK_NV_shader_sm_builtins, VK_AMD_shader_core_properties),
  // else 0: how many subgroups it takes to fill the device.
  uint32_t compute_cores = 0;
  uint32_t max_workgroup_invocations = 0;
  uint32_t max_workgroup_count[3] = {0, 0, 0};
  uint32_t max_push_constants_bytes = 0;
  VkDeviceSize min_storage_buffer_offset_alignment = 0;
  bool uma = false;  // host_maps_device_memory(memory): weights go to mapped device memory
  bool shader_float16 = false;  // enabled when present; the kernels do not need them yet
  bool shader_int8 = false;
  // VK_KHR_cooperative_matrix enabled, offering subgroup-scope 16x16x16 f16 x f16 + f32 -> f32
  // (tensor cores): prefill's matrix products use it (shaders/matmul_coopmat.comp).
  bool coop_matrix_khr = false;
  // shaderIntegerDotProduct (core in Vulkan 1.3) enabled: Q8_0/Q4_0 matvecs quantize activations
  // to int8 and use 4 x int8 dot products (shaders/matvec_dot.comp) where the forward's tuning
  // asks (gpu/tuning.h's int_dot).
  // Accelerated: the driver says packed signed 4x8-bit dot products are native instructions.
  bool integer_dot_product = false;
  bool integer_dot_accelerated = false;
  // VK_KHR_pipeline_executable_properties enabled (ContextOptions::pipeline_stats asked): every
  // compute pipeline's statistics (registers, local memory, ...) go to stderr as it is created.
  bool pipeline_stats = false;
  VkPhysicalDeviceMemoryProperties memory{};
};

class VulkanContext {
 public:
  static Result<std::unique_ptr<VulkanContext>> create(const ContextOptions& options);
  ~VulkanContext();
  VulkanContext(const VulkanContext&) = delete;
  VulkanContext& operator=(const VulkanContext&) = delete;

  VkInstance instance() const { return instance_; }
  VkPhysicalDevice physical_device() const { return physical_; }
  VkDevice device() const { return device_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return queue_family_; }
  const DeviceInfo& info() const { return info_; }
  // Buffers live in host-visible device-local memory (UMA) instead of being staged.
  bool use_host_visible_device_memory() const { return info_.uma && !force_staging_; }

  // The knobs the kernels are made with: the device's defaults and --gpu-tune's overrides.
  const GpuTuning& tuning() const { return tuning_; }
  // For tests that make kernels another way (ScopedTuning in test/gpu/gpu_test_env.h).
  void set_tuning(const GpuTuning& t) { tuning_ = t; }

  // A multi-line description: device, type, driver, heaps, subgroup size, UMA.
  std::string report() const;

  bool validation_enabled() const { return messenger_ != VK_NULL_HANDLE; }
  // Validation errors seen since creation, and their messages (also printed to stderr).
  int validation_error_count() const { return validation_errors_.load(); }
  std::vector<std::string> validation_messages() const;

  // Names a Vulkan object in validation messages and debuggers; no-op without validation.
  void set_name(VkObjectType type, uint64_t handle, const std::string& name) const;

 private:
  VulkanContext() = default;
  Result<void> create_instance(bool validation);
  Result<void> pick_device(int device_index);
  Result<void> create_device(bool pipeline_stats);
  static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                   VkDebugUtilsMessageTypeFlagsEXT types,
                                                   const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                   void* self);

  // Debug-utils entry points of this instance: volk's globals belong to the last instance
  // loaded, which may lack the extension.
  PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger_ = nullptr;
  PFN_vkSetDebugUtilsObjectNameEXT set_object_name_ = nullptr;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  bool force_staging_ = false;
  DeviceInfo info_;
  GpuTuning tuning_;
  std::atomic<int> validation_errors_{0};
  mutable std::mutex messages_mutex_;
  std::vector<std::string> messages_;  // guarded by messages_mutex_
};

// Reads the properties above from a physical device (device_info.cpp).
DeviceInfo read_device_info(VkPhysicalDevice physical);

// Whether a DEVICE_LOCAL | HOST_VISIBLE | HOST_COHERENT memory type lives on the largest
// device-local heap: a unified-memory APU, or a discrete GPU with resizable BAR. A discrete GPU
// without it shows such a type too, on a 256 MiB window, which cannot hold the weights: those
// take staging uploads (a 12B model on an H200 so exposed failed to allocate before this).
bool host_maps_device_memory(const VkPhysicalDeviceMemoryProperties& mem);
const char* device_type_name(VkPhysicalDeviceType type);
// Whether the physical device offers the device extension `name`.
bool has_device_extension(VkPhysicalDevice physical, const char* name);

}  // namespace infer::gpu
