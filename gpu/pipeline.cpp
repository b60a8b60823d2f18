// Pipeline creation: descriptor-set and pipeline layouts, the shader module of one embedded
// SPIR-V variant, specialization constants and an optional pinned subgroup size.
#include "gpu/pipeline.h"

#include <cstdio>
#include <string>
#include <vector>

#include "gpu/context.h"
#include "gpu/vk_check.h"
#include "shaders/spirv.h"

namespace infer::gpu {
namespace {

// One stderr line per executable of the pipeline: the driver's statistics (NVIDIA: register
// count, ...), named `name`.
void log_statistics(VkDevice dev, VkPipeline pipeline, const std::string& name) {
  VkPipelineInfoKHR info{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
  info.pipeline = pipeline;
  uint32_t executables = 0;
  if (vkGetPipelineExecutablePropertiesKHR(dev, &info, &executables, nullptr) != VK_SUCCESS) return;
  for (uint32_t e = 0; e < executables; ++e) {
    VkPipelineExecutableInfoKHR exe{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
    exe.pipeline = pipeline;
    exe.executableIndex = e;
    uint32_t n = 0;
    if (vkGetPipelineExecutableStatisticsKHR(dev, &exe, &n, nullptr) != VK_SUCCESS) continue;
    std::vector<VkPipelineExecutableStatisticKHR> stats(
        n, VkPipelineExecutableStatisticKHR{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR});
    if (vkGetPipelineExecutableStatisticsKHR(dev, &exe, &n, stats.data()) != VK_SUCCESS) continue;
    std::string line = "pipeline stats: " + name;
    for (uint32_t i = 0; i < n; ++i) {
      const VkPipelineExecutableStatisticKHR& st = stats[i];
      line += std::string(" | ") + st.name + " = ";
      switch (st.format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
          line += st.value.b32 ? "true" : "false";
          break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
          line += std::to_string(st.value.i64);
          break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
          line += std::to_string(st.value.u64);
          break;
        default:
          line += std::to_string(st.value.f64);
          break;
      }
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

}  // namespace

Result<std::unique_ptr<Pipeline>> Pipeline::create(const VulkanContext& ctx,
                                                   const PipelineDesc& desc) {
  const shader::SpirvVariant* found = shader::find_spirv(desc.variant);
  const shader::SpirvVariant own{desc.variant, desc.spirv};
  const shader::SpirvVariant* spirv = desc.spirv.empty() ? found : &own;
  if (spirv == nullptr) {
    return make_error(ErrorCode::kInternal, "no embedded shader variant \"" + desc.variant + "\"");
  }
  if (desc.push_bytes > ctx.info().max_push_constants_bytes || desc.push_bytes % 4 != 0) {
    return make_error(ErrorCode::kUnsupported,
                      desc.variant + ": " + std::to_string(desc.push_bytes) +
                          " bytes of push constants, device allows " +
                          std::to_string(ctx.info().max_push_constants_bytes));
  }
  VkDevice dev = ctx.device();
  std::unique_ptr<Pipeline> p(new Pipeline(dev));
  p->bindings_ = desc.bindings;
  p->push_bytes_ = desc.push_bytes;
  p->name_ = desc.variant;
  for (size_t i = 0; i < desc.spec.size(); ++i) {
    p->name_.append(i == 0 ? "{" : ",");
    p->name_.append(std::to_string(desc.spec[i].id));
    p->name_.append("=");
    p->name_.append(std::to_string(desc.spec[i].value));
  }
  if (!desc.spec.empty()) p->name_.append("}");

  std::vector<VkDescriptorSetLayoutBinding> bindings(desc.bindings.size());
  for (size_t i = 0; i < bindings.size(); ++i) {
    bindings[i].binding = uint32_t(i);
    bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  set_info.bindingCount = uint32_t(bindings.size());
  set_info.pBindings = bindings.data();
  INFER_TRY_VOID(vk_check(vkCreateDescriptorSetLayout(dev, &set_info, nullptr, &p->set_layout_),
                          "vkCreateDescriptorSetLayout"));

  VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, desc.push_bytes};
  VkPipelineLayoutCreateInfo layout_info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &p->set_layout_;
  layout_info.pushConstantRangeCount = desc.push_bytes ? 1 : 0;
  layout_info.pPushConstantRanges = &push;
  INFER_TRY_VOID(vk_check(vkCreatePipelineLayout(dev, &layout_info, nullptr, &p->layout_),
                          "vkCreatePipelineLayout"));

  VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  module_info.codeSize = spirv->words.size_bytes();
  module_info.pCode = spirv->words.data();
  VkShaderModule module = VK_NULL_HANDLE;
  INFER_TRY_VOID(
      vk_check(vkCreateShaderModule(dev, &module_info, nullptr, &module), "vkCreateShaderModule"));

  std::vector<VkSpecializationMapEntry> entries(desc.spec.size());
  std::vector<uint32_t> values(desc.spec.size());
  for (size_t i = 0; i < desc.spec.size(); ++i) {
    entries[i] = {desc.spec[i].id, uint32_t(i * sizeof(uint32_t)), sizeof(uint32_t)};
    values[i] = desc.spec[i].value;
  }
  VkSpecializationInfo spec{uint32_t(entries.size()), entries.data(),
                            values.size() * sizeof(uint32_t), values.data()};

  VkPipelineShaderStageRequiredSubgroupSizeCreateInfo subgroup{
      VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO};
  subgroup.requiredSubgroupSize = desc.required_subgroup_size;
  VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = module;
  info.stage.pName = "main";
  info.stage.pSpecializationInfo = &spec;
  if (desc.required_subgroup_size != 0) {
    if (!ctx.info().compute_required_subgroup_size) {
      vkDestroyShaderModule(dev, module, nullptr);
      return make_error(ErrorCode::kUnsupported,
                        p->name_ + ": the device cannot pin the compute subgroup size");
    }
    info.stage.pNext = &subgroup;
    // Every subgroup full: the shader's partial sums assume local size / subgroup size of them.
    if (ctx.info().compute_full_subgroups) {
      info.stage.flags |= VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT;
    }
  }
  info.layout = p->layout_;
  if (ctx.info().pipeline_stats) info.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  VkResult r = vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &info, nullptr, &p->pipeline_);
  vkDestroyShaderModule(dev, module, nullptr);
  if (r != VK_SUCCESS) {
    return make_error(ErrorCode::kVulkan,
                      p->name_ + ": vkCreateComputePipelines failed: " + vk_result_name(r));
  }
  ctx.set_name(VK_OBJECT_TYPE_PIPELINE, uint64_t(p->pipeline_), p->name_);
  if (ctx.info().pipeline_stats) log_statistics(dev, p->pipeline_, p->name_);
  return p;
}

Pipeline::~Pipeline() {
  if (pipeline_ != VK_NULL_HANDLE) vkDestroyPipeline(device_, pipeline_, nullptr);
  if (layout_ != VK_NULL_HANDLE) vkDestroyPipelineLayout(device_, layout_, nullptr);
  if (set_layout_ != VK_NULL_HANDLE) vkDestroyDescriptorSetLayout(device_, set_layout_, nullptr);
}

}  // namespace infer::gpu
