// libFuzzer target: parse_safetensors_header on arbitrary bytes, as if they were a whole file.
// Anything but a clean Result (a crash, a sanitizer report, a leak) is a bug.
#include <cstddef>
#include <cstdint>
#include <span>

#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = infer::parse_safetensors_header(std::span<const uint8_t>(data, size), size, "fuzz");
  if (r.ok()) {
    // Every accepted tensor lies inside the data section and sizes agree with its shape.
    for (const infer::TensorEntry& e : r->tensors) {
      if (e.end < e.begin || r->data_start + e.end > size ||
          e.end - e.begin != uint64_t(e.numel()) * infer::dtype_size(e.dtype)) {
        __builtin_trap();
      }
    }
  }
  return 0;
}
