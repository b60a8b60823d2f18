// GGML Q8_0/Q4_0 row quantization, a transcription of ggml-quants.c's quantize_row_q8_0_ref and
// quantize_row_q4_0_ref so our blocks are byte-identical with GGUF files.
#include "model/quant.h"

#include <cmath>

#include "base/check.h"

namespace infer {

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t k) {
  INFER_CHECK(k % kQK == 0, "q8_0 row of %lld weights is not a multiple of 32", (long long)k);
  for (int64_t i = 0; i < k / kQK; ++i) {
    const float* xb = x + i * kQK;
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = amax > std::fabs(xb[j]) ? amax : std::fabs(xb[j]);
    // GGML scales by the unrounded d; only the stored scale is fp16.
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) y[i].qs[j] = int8_t(std::roundf(xb[j] * id));
  }
}

void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t k) {
  INFER_CHECK(k % kQK == 0, "q4_0 row of %lld weights is not a multiple of 32", (long long)k);
  for (int64_t i = 0; i < k / kQK; ++i) {
    const float* xb = x + i * kQK;
    // The weight of largest magnitude, with its sign: it maps to -8, the one-sided end of 4 bits.
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      if (amax < std::fabs(xb[j])) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      // (int8_t)(v + 8.5f) truncates toward zero, as in GGML; MIN clamps +8 (the far end) to 15.
      const int8_t q0 = int8_t(xb[j] * id + 8.5f);
      const int8_t q1 = int8_t(xb[j + kQK / 2] * id + 8.5f);
      const uint8_t lo = uint8_t(q0 < 15 ? q0 : 15);
      const uint8_t hi = uint8_t(q1 < 15 ? q1 : 15);
      y[i].qs[j] = uint8_t(lo | hi << 4);
    }
  }
}

void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t k) {
  INFER_CHECK(k % kQK == 0, "q8_0 row of %lld weights is not a multiple of 32", (long long)k);
  for (int64_t i = 0; i < k / kQK; ++i) {
    const float d = fp16_to_f32(x[i].d);
    for (int j = 0; j < kQK; ++j) y[i * kQK + j] = float(x[i].qs[j]) * d;
  }
}

void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t k) {
  INFER_CHECK(k % kQK == 0, "q4_0 row of %lld weights is not a multiple of 32", (long long)k);
  for (int64_t i = 0; i < k / kQK; ++i) {
    const float d = fp16_to_f32(x[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[i * kQK + j] = float((x[i].qs[j] & 0x0f) - 8) * d;
      y[i * kQK + j + kQK / 2] = float((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

}  // namespace infer
