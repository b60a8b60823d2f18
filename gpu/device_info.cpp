// Reads what the backend needs from a VkPhysicalDevice and describes it for --gpu's report.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/context.h"

namespace infer::gpu {

const char* device_type_name(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "CPU";
    default:
      return "other";
  }
}

bool has_device_extension(VkPhysicalDevice physical, const char* name) {
  uint32_t n = 0;
  if (vkEnumerateDeviceExtensionProperties(physical, nullptr, &n, nullptr) != VK_SUCCESS) {
    return false;
  }
  std::vector<VkExtensionProperties> exts(n);
  if (vkEnumerateDeviceExtensionProperties(physical, nullptr, &n, exts.data()) != VK_SUCCESS) {
    return false;
  }
  for (const VkExtensionProperties& e : exts) {
    if (std::strcmp(e.extensionName, name) == 0) return true;
  }
  return false;
}

namespace {

// The device's compute cores (NVIDIA SMs, AMD CUs), where its driver says: how many subgroups
// fill it (how many rows a one-token product gives a subgroup). 0: not said.
uint32_t compute_cores(VkPhysicalDevice physical) {
  if (has_device_extension(physical, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) {
    VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
    VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &sm};
    vkGetPhysicalDeviceProperties2(physical, &props);
    return sm.shaderSMCount;
  }
  if (has_device_extension(physical, VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME)) {
    VkPhysicalDeviceShaderCorePropertiesAMD core{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD};
    VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &core};
    vkGetPhysicalDeviceProperties2(physical, &props);
    return core.shaderEngineCount * core.shaderArraysPerEngineCount *
           core.computeUnitsPerShaderArray;
  }
  return 0;
}

}  // namespace

DeviceInfo read_device_info(VkPhysicalDevice physical) {
  VkPhysicalDeviceShaderIntegerDotProductProperties dot{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES};
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES,
                                          &dot};
  VkPhysicalDeviceSubgroupSizeControlProperties size_control{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES, &driver};
  VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
                                              &size_control};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &subgroup};
  vkGetPhysicalDeviceProperties2(physical, &props);

  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f12};
  vkGetPhysicalDeviceFeatures2(physical, &features);

  DeviceInfo info;
  const VkPhysicalDeviceProperties& p = props.properties;
  info.name = p.deviceName;
  info.type = p.deviceType;
  info.driver_name = driver.driverName;
  info.driver_info = driver.driverInfo;
  info.api_version = p.apiVersion;
  info.subgroup_size = subgroup.subgroupSize;
  info.min_subgroup_size = size_control.minSubgroupSize ? size_control.minSubgroupSize : 1;
  info.max_subgroup_size =
      size_control.maxSubgroupSize ? size_control.maxSubgroupSize : subgroup.subgroupSize;
  info.compute_required_subgroup_size =
      (size_control.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
  info.max_workgroup_invocations = p.limits.maxComputeWorkGroupInvocations;
  for (int i = 0; i < 3; ++i) info.max_workgroup_count[i] = p.limits.maxComputeWorkGroupCount[i];
  info.max_push_constants_bytes = p.limits.maxPushConstantsSize;
  info.min_storage_buffer_offset_alignment = p.limits.minStorageBufferOffsetAlignment;
  info.shader_float16 = f12.shaderFloat16;
  info.shader_int8 = f12.shaderInt8;
  info.integer_dot_accelerated = dot.integerDotProduct4x8BitPackedSignedAccelerated;
  info.compute_cores = compute_cores(physical);

  vkGetPhysicalDeviceMemoryProperties(physical, &info.memory);
  info.uma = host_maps_device_memory(info.memory);
  return info;
}

bool host_maps_device_memory(const VkPhysicalDeviceMemoryProperties& mem) {
  VkDeviceSize largest_local = 0;
  for (uint32_t h = 0; h < mem.memoryHeapCount; ++h) {
    if ((mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0) {
      largest_local = std::max(largest_local, mem.memoryHeaps[h].size);
    }
  }
  const VkMemoryPropertyFlags mapped = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                       VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                       VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  for (uint32_t i = 0; i < mem.memoryTypeCount; ++i) {
    const VkMemoryType& t = mem.memoryTypes[i];
    if ((t.propertyFlags & mapped) == mapped && t.heapIndex < mem.memoryHeapCount &&
        mem.memoryHeaps[t.heapIndex].size >= largest_local) {
      return true;
    }
  }
  return false;
}

std::string VulkanContext::report() const {
  const DeviceInfo& d = info_;
  char line[512];
  std::string out;
  std::snprintf(line, sizeof line, "device: %s (%s), Vulkan %u.%u.%u\n", d.name.c_str(),
                device_type_name(d.type), VK_API_VERSION_MAJOR(d.api_version),
                VK_API_VERSION_MINOR(d.api_version), VK_API_VERSION_PATCH(d.api_version));
  out += line;
  std::snprintf(line, sizeof line, "driver: %s, %s\n", d.driver_name.c_str(),
                d.driver_info.c_str());
  out += line;
  for (uint32_t h = 0; h < d.memory.memoryHeapCount; ++h) {
    const VkMemoryHeap& heap = d.memory.memoryHeaps[h];
    std::string flags;
    for (uint32_t t = 0; t < d.memory.memoryTypeCount; ++t) {
      const VkMemoryType& type = d.memory.memoryTypes[t];
      if (type.heapIndex != h) continue;
      flags += " [";
      if (type.propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) flags += "device-local ";
      if (type.propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) flags += "host-visible ";
      if (type.propertyFlags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) flags += "coherent ";
      if (type.propertyFlags & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) flags += "cached ";
      if (!flags.empty() && flags.back() == ' ') flags.pop_back();
      flags += "]";
    }
    std::snprintf(
        line, sizeof line, "heap %u: %.1f MiB%s%s\n", h, double(heap.size) / (1024.0 * 1024.0),
        (heap.flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) ? " device-local" : "", flags.c_str());
    out += line;
  }
  std::snprintf(line, sizeof line, "subgroup size: %u (range %u..%u%s)\n", d.subgroup_size,
                d.min_subgroup_size, d.max_subgroup_size,
                d.compute_required_subgroup_size ? ", settable for compute" : "");
  out += line;
  if (d.compute_cores > 0) {
    std::snprintf(line, sizeof line, "compute cores: %u\n", d.compute_cores);
    out += line;
  }
  std::snprintf(line, sizeof line, "uma: %s%s\n", d.uma ? "yes" : "no",
                d.uma && force_staging_ ? " (staging forced)" : "");
  out += line;
  std::snprintf(line, sizeof line, "cooperative matrices: %s\n",
                d.coop_matrix_khr ? "VK_KHR_cooperative_matrix, f16 16x16x16" : "no");
  out += line;
  std::snprintf(line, sizeof line, "integer dot products: %s%s\n",
                d.integer_dot_product ? "yes" : "no",
                !d.integer_dot_product    ? ""
                : d.integer_dot_accelerated ? " (4x8-bit packed accelerated)"
                                            : " (not accelerated)");
  out += line;
  std::snprintf(line, sizeof line, "validation: %s\n", validation_enabled() ? "on" : "off");
  out += line;
  return out;
}

}  // namespace infer::gpu
