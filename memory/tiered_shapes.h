// What episodic memory stores of a model: the rows of its tiered layers (full attention, KV
// owning), and the fingerprint a store file carries so that another model's file is refused.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace infer::memory {

// One tiered layer's row shape (K and V alike): [n_kv, d].
struct TieredShape {
  int layer = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;
  int row_floats() const { return num_key_value_heads * head_dim; }
};
// The tiered layers of cfg: full-attention layers that compute K/V (not KV-shared), ascending.
std::vector<TieredShape> tiered_shapes(const ModelConfig& cfg);
// FNV-1a 64 over the config fields and tensor shapes that make rows comparable.
uint64_t model_fingerprint(const ModelConfig& cfg);

}  // namespace infer::memory
