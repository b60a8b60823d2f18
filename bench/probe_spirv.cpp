// Finds a probe shader in bench/'s own embedded table (probe_spirv.h).
#include "bench/probe_spirv.h"

#include <string>

#include "base/check.h"

namespace infer::bench {

std::span<const uint32_t> probe_spirv(std::string_view name) {
  for (const shader::SpirvVariant& v : spirv_variants()) {
    if (v.name == name) return v.words;
  }
  INFER_CHECK(false, "no probe shader \"%s\" in bench/meson.build", std::string(name).c_str());
  return {};
}

}  // namespace infer::bench
