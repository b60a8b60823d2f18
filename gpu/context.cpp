// VulkanContext creation: loader (volk), 1.3 instance with optional validation, device choice,
// one compute queue and the features the shaders use.
#include "gpu/context.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gpu/coop_matrix_khr.h"
#include "gpu/vk_check.h"

namespace infer::gpu {
namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";
constexpr size_t kMaxKeptMessages = 64;

Error vulkan_error(std::string message) {
  return make_error(ErrorCode::kVulkan, std::move(message));
}

bool has_layer(const char* name) {
  uint32_t n = 0;
  if (vkEnumerateInstanceLayerProperties(&n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkLayerProperties> layers(n);
  if (vkEnumerateInstanceLayerProperties(&n, layers.data()) != VK_SUCCESS) return false;
  for (const VkLayerProperties& l : layers) {
    if (std::strcmp(l.layerName, name) == 0) return true;
  }
  return false;
}

// The first queue family that can run compute, or -1.
int compute_queue_family(VkPhysicalDevice physical) {
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &n, nullptr);
  std::vector<VkQueueFamilyProperties> families(n);
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &n, families.data());
  for (uint32_t i = 0; i < n; ++i) {
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) return int(i);
  }
  return -1;
}

bool is_gpu(VkPhysicalDeviceType t) {
  return t == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU || t == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
}

}  // namespace

Result<std::unique_ptr<VulkanContext>> VulkanContext::create(const ContextOptions& options) {
  if (volkInitialize() != VK_SUCCESS) {
    return vulkan_error("no Vulkan loader found (libvulkan.so.1): install a Vulkan driver");
  }
  if (volkGetInstanceVersion() < VK_API_VERSION_1_3) {
    return vulkan_error("the Vulkan loader supports only up to 1." +
                        std::to_string(VK_API_VERSION_MINOR(volkGetInstanceVersion())) +
                        "; infer needs Vulkan 1.3");
  }
  std::unique_ptr<VulkanContext> ctx(new VulkanContext());
  ctx->force_staging_ = options.force_staging;
  INFER_TRY_VOID(ctx->create_instance(options.validation));
  INFER_TRY_VOID(ctx->pick_device(options.device_index));
  INFER_TRY_VOID(ctx->create_device(options.pipeline_stats));
  ctx->tuning_ = default_tuning(ctx->info_);
  INFER_TRY_VOID(apply_tuning(options.tuning, ctx->tuning_));
  return ctx;
}

VulkanContext::~VulkanContext() {
  if (device_ != VK_NULL_HANDLE) {
    vkDeviceWaitIdle(device_);
    vkDestroyDevice(device_, nullptr);
  }
  if (messenger_ != VK_NULL_HANDLE) destroy_messenger_(instance_, messenger_, nullptr);
  if (instance_ != VK_NULL_HANDLE) vkDestroyInstance(instance_, nullptr);
}

Result<void> VulkanContext::create_instance(bool validation) {
  if (validation && !has_layer(kValidationLayer)) {
    return vulkan_error(std::string("validation requested but ") + kValidationLayer +
                        " is not installed (Debian: vulkan-validationlayers)");
  }
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "infer";
  app.pEngineName = "infer";
  app.apiVersion = VK_API_VERSION_1_3;

  VkDebugUtilsMessengerCreateInfoEXT messenger{
      VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  messenger.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                              VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger.pfnUserCallback = &VulkanContext::on_message;
  messenger.pUserData = this;

  const char* layers[] = {kValidationLayer};
  const char* extensions[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.pApplicationInfo = &app;
  if (validation) {
    info.pNext = &messenger;  // also reports problems in vkCreateInstance/vkDestroyInstance
    info.enabledLayerCount = 1;
    info.ppEnabledLayerNames = layers;
    info.enabledExtensionCount = 1;
    info.ppEnabledExtensionNames = extensions;
  }
  INFER_TRY_VOID(vk_check(vkCreateInstance(&info, nullptr, &instance_), "vkCreateInstance"));
  // Instance-level pointers only: device calls go through the loader's trampolines, so several
  // contexts (several devices) can live side by side.
  volkLoadInstance(instance_);
  if (validation) {
    auto create_messenger = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
    destroy_messenger_ = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    set_object_name_ = reinterpret_cast<PFN_vkSetDebugUtilsObjectNameEXT>(
        vkGetInstanceProcAddr(instance_, "vkSetDebugUtilsObjectNameEXT"));
    if (!create_messenger || !destroy_messenger_ || !set_object_name_) {
      return vulkan_error("VK_EXT_debug_utils enabled but its functions are missing");
    }
    INFER_TRY_VOID(vk_check(create_messenger(instance_, &messenger, nullptr, &messenger_),
                            "vkCreateDebugUtilsMessengerEXT"));
  }
  return Ok{};
}

Result<void> VulkanContext::pick_device(int device_index) {
  uint32_t n = 0;
  INFER_TRY_VOID(
      vk_check(vkEnumeratePhysicalDevices(instance_, &n, nullptr), "vkEnumeratePhysicalDevices"));
  std::vector<VkPhysicalDevice> devices(n);
  INFER_TRY_VOID(vk_check(vkEnumeratePhysicalDevices(instance_, &n, devices.data()),
                          "vkEnumeratePhysicalDevices"));
  if (n == 0) return vulkan_error("no Vulkan device found");

  auto usable = [&](uint32_t i, std::string* why) {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(devices[i], &p);
    if (p.apiVersion < VK_API_VERSION_1_3) {
      *why = std::string(p.deviceName) + " supports Vulkan 1." +
             std::to_string(VK_API_VERSION_MINOR(p.apiVersion)) + ", infer needs 1.3";
      return false;
    }
    if (compute_queue_family(devices[i]) < 0) {
      *why = std::string(p.deviceName) + " has no compute queue";
      return false;
    }
    return true;
  };

  std::string why;
  if (device_index >= 0) {
    if (uint32_t(device_index) >= n) {
      return vulkan_error("device index " + std::to_string(device_index) +
                          " out of range: " + std::to_string(n) + " Vulkan device(s)");
    }
    if (!usable(uint32_t(device_index), &why)) return vulkan_error(why);
    physical_ = devices[size_t(device_index)];
  } else {
    for (int pass = 0; pass < 2 && physical_ == VK_NULL_HANDLE; ++pass) {
      for (uint32_t i = 0; i < n; ++i) {
        VkPhysicalDeviceProperties p;
        vkGetPhysicalDeviceProperties(devices[i], &p);
        if ((pass == 1 || is_gpu(p.deviceType)) && usable(i, &why)) {
          physical_ = devices[i];
          break;
        }
      }
    }
    if (physical_ == VK_NULL_HANDLE) return vulkan_error("no usable Vulkan device: " + why);
  }
  queue_family_ = uint32_t(compute_queue_family(physical_));
  info_ = read_device_info(physical_);
  return Ok{};
}

namespace {

// An extension's features (f, with its sType set) as the device reports them, where `offered`.
template <class Features>
void query_features(VkPhysicalDevice physical, bool offered, Features& f) {
  if (!offered) return;
  VkPhysicalDeviceFeatures2 q{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f};
  vkGetPhysicalDeviceFeatures2(physical, &q);
}

// Whether the device offers the one cooperative-matrix shape matmul_coopmat.comp uses:
// subgroup-scope 16x16x16 f16 x f16 + f32 -> f32, among the shapes VK_KHR_cooperative_matrix lists.
bool offers_khr_f16_coop_16x16x16(VkInstance instance, VkPhysicalDevice physical) {
  const auto properties = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
  uint32_t n = 0;
  if (properties == nullptr || properties(physical, &n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkCooperativeMatrixPropertiesKHR> props(
      n, VkCooperativeMatrixPropertiesKHR{VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR});
  if (properties(physical, &n, props.data()) != VK_SUCCESS) return false;
  for (const VkCooperativeMatrixPropertiesKHR& p : props) {
    if (p.MSize == 16 && p.NSize == 16 && p.KSize == 16 &&
        p.AType == VK_COMPONENT_TYPE_FLOAT16_KHR && p.BType == VK_COMPONENT_TYPE_FLOAT16_KHR &&
        p.CType == VK_COMPONENT_TYPE_FLOAT32_KHR && p.ResultType == VK_COMPONENT_TYPE_FLOAT32_KHR &&
        p.scope == VK_SCOPE_SUBGROUP_KHR && !p.saturatingAccumulation) {
      return true;
    }
  }
  return false;
}

}  // namespace

Result<void> VulkanContext::create_device(bool pipeline_stats) {
  VkPhysicalDeviceVulkan13Features has13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  VkPhysicalDeviceVulkan12Features has12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                         &has13};
  VkPhysicalDeviceVulkan11Features has11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                         &has12};
  VkPhysicalDeviceFeatures2 has{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &has11};
  vkGetPhysicalDeviceFeatures2(physical_, &has);
  // Cooperative matrices for prefill's products where offered (else the f32 tiled kernel runs
  // them).
  const bool coop_base =
      has12.shaderFloat16 && has13.subgroupSizeControl && has13.computeFullSubgroups;
  const bool khr_extension =
      coop_base && has_device_extension(physical_, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR has_khr{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
  query_features(physical_, khr_extension, has_khr);
  const bool coop_khr = khr_extension && has_khr.cooperativeMatrix &&
                        offers_khr_f16_coop_16x16x16(instance_, physical_);

  // With --profile: the driver's statistics of each pipeline (register count, spills), for
  // tuning the kernels on a device without a profiler at hand.
  const bool stats_extension =
      pipeline_stats &&
      has_device_extension(physical_, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR has_stats{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  query_features(physical_, stats_extension, has_stats);
  const bool stats = stats_extension && has_stats.pipelineExecutableInfo;
  if (!has11.storageBuffer16BitAccess) {
    return vulkan_error(info_.name +
                        " lacks storageBuffer16BitAccess (needed to read bf16 and "
                        "GGML blocks)");
  }
  if (!has13.synchronization2) return vulkan_error(info_.name + " lacks synchronization2");
  // glslc's vulkan1.3 SPIR-V sizes workgroups with LocalSizeId, which needs maintenance4.
  if (!has13.maintenance4) return vulkan_error(info_.name + " lacks maintenance4");

  // Enable what the shaders use; optional features only when present.
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR f_khr{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
  f_khr.cooperativeMatrix = VK_TRUE;
  void* const coop_features = coop_khr ? static_cast<void*>(&f_khr) : nullptr;
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR f_stats{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
      coop_features};
  f_stats.pipelineExecutableInfo = VK_TRUE;
  VkPhysicalDeviceVulkan13Features f13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
                                       stats ? static_cast<void*>(&f_stats) : coop_features};
  f13.synchronization2 = VK_TRUE;
  f13.maintenance4 = VK_TRUE;
  f13.subgroupSizeControl = has13.subgroupSizeControl;
  f13.computeFullSubgroups = has13.computeFullSubgroups;
  f13.shaderIntegerDotProduct = has13.shaderIntegerDotProduct;
  info_.integer_dot_product = has13.shaderIntegerDotProduct;
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, &f13};
  f12.storageBuffer8BitAccess = has12.storageBuffer8BitAccess;
  f12.shaderInt8 = has12.shaderInt8;
  f12.shaderFloat16 = has12.shaderFloat16;
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, &f12};
  f11.storageBuffer16BitAccess = VK_TRUE;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f11};
  features.features.shaderInt16 = has.features.shaderInt16;
  if (!has13.subgroupSizeControl) info_.compute_required_subgroup_size = false;
  info_.compute_full_subgroups = has13.computeFullSubgroups;

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue.queueFamilyIndex = queue_family_;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  VkDeviceCreateInfo info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, &features};
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queue;
  std::vector<const char*> extensions;
  if (coop_khr) extensions.push_back(VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
  if (stats) extensions.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
  info.enabledExtensionCount = uint32_t(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  info_.coop_matrix_khr = coop_khr;
  info_.pipeline_stats = stats;
  INFER_TRY_VOID(vk_check(vkCreateDevice(physical_, &info, nullptr, &device_), "vkCreateDevice"));
  vkGetDeviceQueue(device_, queue_family_, 0, &queue_);
  return Ok{};
}

std::vector<std::string> VulkanContext::validation_messages() const {
  std::lock_guard<std::mutex> lock(messages_mutex_);
  return messages_;
}

void VulkanContext::set_name(VkObjectType type, uint64_t handle, const std::string& name) const {
  if (messenger_ == VK_NULL_HANDLE) return;
  VkDebugUtilsObjectNameInfoEXT info{VK_STRUCTURE_TYPE_DEBUG_UTILS_OBJECT_NAME_INFO_EXT};
  info.objectType = type;
  info.objectHandle = handle;
  info.pObjectName = name.c_str();
  set_object_name_(device_, &info);
}

VKAPI_ATTR VkBool32 VKAPI_CALL VulkanContext::on_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT* data, void* self_ptr) {
  auto* self = static_cast<VulkanContext*>(self_ptr);
  const bool error = severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  // Loader chatter ("env var VK_INSTANCE_LAYERS defined") is a general warning: not printed.
  if (!error && types == VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT) return VK_FALSE;
  const char* text = data && data->pMessage ? data->pMessage : "(no message)";
  std::fprintf(stderr, "[vulkan %s] %s\n", error ? "error" : "warning", text);
  if (error) {
    self->validation_errors_.fetch_add(1);
    std::lock_guard<std::mutex> lock(self->messages_mutex_);
    if (self->messages_.size() < kMaxKeptMessages) self->messages_.emplace_back(text);
  }
  return VK_FALSE;  // never abort the call: the count is what fails a test
}

}  // namespace infer::gpu
