// GGML Q8_0 and Q4_0 block formats (32 weights, fp16 scale), bit-exact with ggml-quants.c so
// GGUF tensors could be used as they are.
#pragma once

#include <cstdint>

#include "base/half.h"

namespace infer {

constexpr int kQK = 32;  // weights per block, both formats

struct BlockQ8_0 {
  fp16 d;  // scale: x ≈ d * qs[i]
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ4_0 {
  fp16 d;               // scale: x ≈ d * (nibble - 8)
  uint8_t qs[kQK / 2];  // weight i in the low nibble of qs[i], weight i+16 in the high nibble
};
static_assert(sizeof(BlockQ4_0) == 18);

// k must be a multiple of 32.
void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t k);
void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t k);
void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t k);
void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t k);

}  // namespace infer
