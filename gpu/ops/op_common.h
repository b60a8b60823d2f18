// What the row and element-wise ops (norm, embed, elementwise) share: workgroup sizes from the
// device and the size checks of their bindings.
#pragma once

#include <algorithm>
#include <cstdint>

#include "base/check.h"
#include "gpu/context.h"
#include "gpu/recorder.h"

namespace infer::gpu {

// A workgroup of about `target` invocations, a whole number of subgroups within the device's
// limit; max_subgroups bounds gl_NumSubgroups, since the driver may pick any subgroup size down
// to the minimum (sizes per-subgroup shared memory).
struct WorkgroupSize {
  uint32_t local = 0;
  uint32_t max_subgroups = 0;
};

inline WorkgroupSize workgroup_size(const DeviceInfo& info, uint32_t target) {
  const uint32_t subgroup = std::max(1u, info.subgroup_size);
  WorkgroupSize s;
  s.local =
      std::max(subgroup, std::min(target, info.max_workgroup_invocations) / subgroup * subgroup);
  s.max_subgroups = std::max(1u, s.local / std::max(1u, info.min_subgroup_size));
  return s;
}

// Bytes of n_tokens rows of `cols` activations quantized for the integer-dot products
// (shaders/coop_x_prep.comp's INT8 layout, which add_norm, the split decode attention and
// gate-up also write): an int8 a column, then an f32 scale a block of 32.
constexpr uint64_t int8_x_bytes(uint64_t n_tokens, uint64_t cols) {
  return n_tokens * (cols + cols / 8);
}

// ceil(a / b): workgroups for a items, b a workgroup (and the like).
constexpr uint32_t div_up(uint64_t a, uint64_t b) { return uint32_t((a + b - 1) / b); }

// The fewest workgroups along x every Vulkan device takes (maxComputeWorkGroupCount[0] >= 65535).
// wrapped_groups() never goes past it, even where the device allows more, so the wrap it tests
// on one device is the one every device runs.
constexpr uint32_t kMaxGroupsX = 65535;

// `count` workgroups along x up to kMaxGroupsX, the rest wrapped into y (the shader computes its
// index as y * num_x + x and skips those past count).
inline Groups wrapped_groups(const DeviceInfo& info, uint32_t count) {
  Groups g;
  g.x = std::max(1u, std::min({count, info.max_workgroup_count[0], kMaxGroupsX}));
  g.y = (count + g.x - 1) / g.x;
  return g;
}

// Bytes from the binding's offset to the end of its range.
inline VkDeviceSize binding_bytes(const Binding& b) {
  const VkDeviceSize rest = b.offset <= b.buffer->size() ? b.buffer->size() - b.offset : 0;
  return b.range == VK_WHOLE_SIZE ? rest : std::min(b.range, rest);
}

// Aborts unless `b` has a buffer holding `words` 32-bit words (floats or uints).
inline void check_words(const char* op, const char* what, const Binding& b, uint64_t words) {
  INFER_CHECK(b.buffer != nullptr, "%s: no %s buffer", op, what);
  INFER_CHECK(binding_bytes(b) >= words * 4, "%s: %s \"%s\" holds fewer than %llu words", op, what,
              b.buffer->name().c_str(), (unsigned long long)words);
}

}  // namespace infer::gpu
