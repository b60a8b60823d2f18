// Numerically stable softmax in fp32 (GEMMA4_TEXT.md §4.5 attention, §4.9 router).
#pragma once

#include <cstdint>

namespace infer {

// z: [n] f32, replaced by softmax(z). n must be > 0.
void softmax(float* z, int64_t n);

}  // namespace infer
