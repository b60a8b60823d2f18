// The SPIR-V of every shader variant in shaders/meson.build, embedded at build time
// (embed_spirv.py); a variant's name names its pipeline in traces and errors.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace infer::shader {

struct SpirvVariant {
  std::string_view name;  // e.g. "matvec_q4_0"
  std::span<const uint32_t> words;
};

std::span<const SpirvVariant> spirv_variants();

// The variant called `name`, or nullptr.
inline const SpirvVariant* find_spirv(std::string_view name) {
  for (const SpirvVariant& v : spirv_variants()) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

}  // namespace infer::shader
