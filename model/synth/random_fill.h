// How mkmodel fills a synthetic tensor: a counter-based generator (every element is a pure function
// of seed, tensor name and element index, so any split across threads gives the same bytes) and
// one uniform distribution per tensor role, chosen so a random model runs without blowing up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "model/config.h"
#include "model/safetensors.h"
#include "model/tensor_table.h"

namespace infer {

// Uniform on [center - half_width, center + half_width].
struct FillRule {
  float center = 0.0f;
  float half_width = 0.0f;
};

// The distribution of one tensor of the table, by kind and name, given the text config (H, P):
//   norms, layer_scalar, router scales: 1 ± 0.1;
//   biases: 0 ± 0.02;
//   embed_tokens: std 2/√H: the √H-scaled stream starts at RMS 2 and tied logits have std ~2.
//     Much larger and a token's own row dominates its logits (a random tied model then repeats
//     its input forever); std ~1 as in some inits gives logits of std √H, all soft-capped;
//   lm_head (untied configs only): the same std 2/√H;
//   embed_tokens_per_layer: std 1/√P, so the √P-scaled token part has RMS ~1;
//   router.proj: std 1, so router logits (input RMS H^-1/2, §4.9) have std ~1;
//   every other matrix [.., out, in]: std 1/√in.
FillRule fill_rule(const TensorSpec& spec, const TextConfig& tc);

// The generator key of one tensor: splitmix64 of the seed mixed with a hash of the name, so adding
// a tensor to the table does not change the bytes of the others.
uint64_t tensor_key(uint64_t seed, std::string_view name);

// Writes elements [begin, end) of a tensor filled by (key, rule) into `out` (end - begin elements
// of `dtype`, little-endian).
void fill_elements(uint64_t key, FillRule rule, DType dtype, int64_t begin, int64_t end,
                   uint8_t* out);

}  // namespace infer
