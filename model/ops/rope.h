// Rotary position embedding (GEMMA4_TEXT.md §4.6): rotate-half (NeoX) pairs (j, j + d/2), angles
// pos·inv_freq[j] in fp32. Proportional RoPE is the same rotation with zero inv_freq tails.
#pragma once

#include <cstdint>

namespace infer {

// inv_freq: [d/2] f32 -> cos, sin: [T, d/2] f32 for positions pos0 .. pos0+T-1.
void rope_tables(const float* inv_freq, int64_t half_d, int64_t pos0, int64_t T, float* cos,
                 float* sin);

// x: [T, n_heads, d] f32, rotated in place; cos, sin: [T, d/2] f32 from rope_tables.
void rope_apply(float* x, int64_t T, int64_t n_heads, int64_t d, const float* cos,
                const float* sin);

}  // namespace infer
