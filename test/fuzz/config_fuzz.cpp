// libFuzzer target: parse_config and parse_generation_config on arbitrary text. An accepted config
// must give a plan a loader can trust: one entry per layer, donors below first_kv_shared.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "model/config.h"
#include "model/tensor_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto g = infer::parse_generation_config(text);
  (void)g;
  auto m = infer::parse_config(text);
  if (!m.ok()) return 0;
  const int L = m->text.num_hidden_layers;
  if (int(m->layers.size()) != L) __builtin_trap();
  for (int i = 0; i < L; ++i) {
    const infer::LayerPlan& p = m->layers[size_t(i)];
    if (p.head_dim <= 0 || p.head_dim % 2 != 0 || p.num_key_value_heads <= 0) __builtin_trap();
    if (p.kv_shared && (p.kv_source >= m->first_kv_shared || p.kv_source < 0)) __builtin_trap();
    if (!p.kv_shared && p.kv_source != i) __builtin_trap();
  }
  if (L <= 64) {  // the table and RoPE tables must not overflow or crash for what parses
    for (const infer::TensorSpec& s : infer::expected_tensors(*m)) {
      for (int64_t d : s.shape) {
        if (d <= 0) __builtin_trap();
      }
    }
    if (m->layers[0].head_dim <= 4096) {
      (void)infer::rope_inv_freq(m->rope(m->layers[0].type), m->layers[0].head_dim);
    }
  }
  return 0;
}
