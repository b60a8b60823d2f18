// The tiered layers' shapes and the model fingerprint (tiered_shapes.h).
#include "memory/tiered_shapes.h"

#include <cstddef>

namespace infer::memory {
namespace {

uint64_t fnv1a(uint64_t h, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}
template <class T>
uint64_t mix(uint64_t h, T v) {
  return fnv1a(h, &v, sizeof v);
}

}  // namespace

std::vector<TieredShape> tiered_shapes(const ModelConfig& cfg) {
  std::vector<TieredShape> s;
  for (size_t l = 0; l < cfg.layers.size(); ++l) {
    const LayerPlan& p = cfg.layers[l];
    if (p.type == LayerType::kFull && !p.kv_shared)
      s.push_back({int(l), p.num_key_value_heads, p.head_dim});
  }
  return s;
}

uint64_t model_fingerprint(const ModelConfig& cfg) {
  const TextConfig& t = cfg.text;
  uint64_t h = 0xcbf29ce484222325ULL;
  h = mix(h, t.vocab_size);
  h = mix(h, t.hidden_size);
  h = mix(h, t.num_hidden_layers);
  h = mix(h, t.num_attention_heads);
  h = mix(h, t.num_key_value_heads);
  h = mix(h, t.head_dim);
  h = mix(h, t.sliding_window);
  h = mix(h, t.hidden_size_per_layer_input);
  h = mix(h, t.num_kv_shared_layers);
  h = mix(h, t.attention_k_eq_v);
  h = mix(h, t.rms_norm_eps);
  for (const LayerPlan& p : cfg.layers) {
    h = mix(h, int(p.type));
    h = mix(h, p.head_dim);
    h = mix(h, p.num_key_value_heads);
    h = mix(h, p.kv_shared);
    h = mix(h, p.kv_source);
  }
  return h;
}

}  // namespace infer::memory
