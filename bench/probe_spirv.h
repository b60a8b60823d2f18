// The SPIR-V of the probes' shaders (bench/meson.build compiles and embeds them apart from the
// product's table in shaders/meson.build, so infer carries none of them).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "shaders/spirv.h"

namespace infer::bench {

std::span<const shader::SpirvVariant> spirv_variants();

// The probe shader called `name`; aborts if bench/meson.build does not build it.
std::span<const uint32_t> probe_spirv(std::string_view name);

}  // namespace infer::bench
