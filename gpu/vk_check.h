// The one way a VkResult becomes a Result: vk_check(r, "vkCreateBuffer") (STYLE.md, Errors).
#pragma once

#include <volk.h>

#include <string>

#include "base/result.h"

namespace infer::gpu {

const char* vk_result_name(VkResult r);

inline Result<void> vk_check(VkResult r, const char* call) {
  if (r == VK_SUCCESS) return Ok{};
  return make_error(ErrorCode::kVulkan, std::string(call) + " failed: " + vk_result_name(r));
}

}  // namespace infer::gpu
