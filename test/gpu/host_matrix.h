// Random weight matrices and activations for the GPU matrix-op tests: a matrix is quantized once
// into host bytes that both the GPU upload and the CPU reference read.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "base/half.h"
#include "model/matrix.h"
#include "model/quant.h"

namespace infer::gpu {

// A matrix in some format, owning its bytes.
struct HostMatrix {
  std::vector<uint8_t> bytes;
  Matrix m;
};

// values: [rows, cols] f32, converted or quantized into `format`.
inline HostMatrix host_matrix(WeightFormat format, int64_t rows, int64_t cols,
                              const float* values) {
  HostMatrix h;
  h.bytes.resize(size_t(rows) * row_bytes(format, cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = values + r * cols;
    uint8_t* dst = h.bytes.data() + size_t(r) * row_bytes(format, cols);
    switch (format) {
      case WeightFormat::kF32:
        std::memcpy(dst, src, size_t(cols) * 4);
        break;
      case WeightFormat::kBF16:
        for (int64_t c = 0; c < cols; ++c) {
          const bf16 b = f32_to_bf16(src[c]);
          std::memcpy(dst + 2 * c, &b, 2);
        }
        break;
      case WeightFormat::kQ8_0:
        quantize_row_q8_0(src, reinterpret_cast<BlockQ8_0*>(dst), cols);
        break;
      case WeightFormat::kQ4_0:
        quantize_row_q4_0(src, reinterpret_cast<BlockQ4_0*>(dst), cols);
        break;
    }
  }
  h.m = Matrix{format, rows, cols, h.bytes.data()};
  return h;
}

// n values uniform in [lo, hi), reproducible from seed.
inline std::vector<float> random_vector(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A [rows, cols] matrix of uniform values in [-1, 1), in `format`.
inline HostMatrix random_matrix(WeightFormat format, int64_t rows, int64_t cols, uint32_t seed) {
  const std::vector<float> f = random_vector(size_t(rows * cols), seed);
  return host_matrix(format, rows, cols, f.data());
}

}  // namespace infer::gpu
