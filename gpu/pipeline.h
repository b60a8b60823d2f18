// Compute pipelines built from embedded SPIR-V (shaders/spirv.h): storage-buffer bindings with
// their access, push constants, and specialization constants chosen per device by each op.
#pragma once

#include <volk.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace infer::gpu {

class VulkanContext;

// How a shader uses a storage-buffer binding; the Recorder derives barriers from it.
enum class Access { kRead, kWrite, kReadWrite };

struct SpecConstant {
  uint32_t id;
  uint32_t value;
};

struct PipelineDesc {
  std::string variant;             // a variant name from shaders/meson.build, e.g. "matvec_q4_0"
  std::vector<Access> bindings;    // storage buffers at bindings 0..n-1
  uint32_t push_bytes = 0;         // size of the push-constant struct (shaders/<op>.h)
  std::vector<SpecConstant> spec;  // sizes chosen from the device
  uint32_t required_subgroup_size = 0;  // pin the subgroup size (0: the driver's choice)
  // SPIR-V from outside the product's table (bench/gpu_probes' shaders); empty: the table's
  // `variant`.
  std::span<const uint32_t> spirv;
};

class Pipeline {
 public:
  static Result<std::unique_ptr<Pipeline>> create(const VulkanContext& ctx,
                                                  const PipelineDesc& desc);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  VkPipeline handle() const { return pipeline_; }
  VkPipelineLayout layout() const { return layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }
  const std::vector<Access>& bindings() const { return bindings_; }
  uint32_t push_bytes() const { return push_bytes_; }
  // The variant and its specialization, e.g. "matvec_q4_0{0=64,1=2,2=1,3=8}", for errors.
  const std::string& name() const { return name_; }

 private:
  explicit Pipeline(VkDevice device) : device_(device) {}

  VkDevice device_;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
  std::vector<Access> bindings_;
  uint32_t push_bytes_ = 0;
  std::string name_;
};

}  // namespace infer::gpu
