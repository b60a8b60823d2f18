// Attention mass (H2O, DESIGN.md §4 `--evict mass`): how much softmax probability each cached key
// received from a chunk's queries, summed over query heads and tokens.
#pragma once

#include <cstdint>

#include "model/ops/attention.h"

namespace infer {

// q: [T, n_q, d] f32 as attention() takes it; s.window must be 0 (full attention). For cached
// keys i < n_cache (positions [0, n_cache) of kv, cache_begin 0): mass[i] += Σ_{t, h} p[h, t, i],
// p the softmax over every key query t sees (cache and chunk, §4.7). scores: [n_cache + T]
// scratch. Plain loops, fp32 scores (as attention's); allocates nothing.
void attention_key_mass(const float* q, const AttentionShape& s, const KvView& kv,
                        int64_t n_cache, float* scores, float* mass);

}  // namespace infer
