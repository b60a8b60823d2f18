// RMSNorm (GEMMA4_TEXT.md §4.1): x̂·w with the weight used as stored (no +1), ε inside the root,
// computed in fp32. The no-weight variant serves v_norm and the MoE router's input norm.
#pragma once

#include <cstdint>

namespace infer {

// x: [rows, n] f32, w: [n] f32 or nullptr (no weight) -> out: [rows, n] f32; out may alias x.
// Each row is normalised over its n elements (H for the stream, d per head, P per PLE slice).
void rms_norm(const float* x, const float* w, int64_t rows, int64_t n, float eps, float* out);

}  // namespace infer
