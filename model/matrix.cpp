// Weight-format sizes, single-row dequantization and whole-matrix quantization at load time.
#include "model/matrix.h"

#include <cstring>

#include <vector>

#include "base/check.h"
#include "base/half.h"
#include "model/quant.h"
#include "model/thread_pool.h"

namespace infer {

const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::kF32:
      return "f32";
    case WeightFormat::kBF16:
      return "bf16";
    case WeightFormat::kQ8_0:
      return "q8_0";
    case WeightFormat::kQ4_0:
      return "q4_0";
  }
  return "?";
}

size_t row_bytes(WeightFormat f, int64_t cols) {
  switch (f) {
    case WeightFormat::kF32:
      return size_t(cols) * 4;
    case WeightFormat::kBF16:
      return size_t(cols) * 2;
    case WeightFormat::kQ8_0:
      INFER_DCHECK(cols % kQK == 0, "q8_0 cols %lld", (long long)cols);
      return size_t(cols / kQK) * sizeof(BlockQ8_0);
    case WeightFormat::kQ4_0:
      INFER_DCHECK(cols % kQK == 0, "q4_0 cols %lld", (long long)cols);
      return size_t(cols / kQK) * sizeof(BlockQ4_0);
  }
  return 0;
}

void dequantize_row(const Matrix& m, int64_t r, float* out) {
  INFER_DCHECK(r >= 0 && r < m.rows, "row %lld of %lld", (long long)r, (long long)m.rows);
  const uint8_t* p = m.row(r);
  switch (m.format) {
    // Rows need not be aligned to their element (a safetensors f32 tensor may follow an odd-length
    // bf16 one), so read them as bytes.
    case WeightFormat::kF32:
      std::memcpy(out, p, size_t(m.cols) * sizeof(float));
      return;
    case WeightFormat::kBF16:
      for (int64_t c = 0; c < m.cols; ++c) {
        bf16 h;
        std::memcpy(&h, p + size_t(c) * sizeof(bf16), sizeof(bf16));
        out[c] = bf16_to_f32(h);
      }
      return;
    case WeightFormat::kQ8_0:
      dequantize_row_q8_0(reinterpret_cast<const BlockQ8_0*>(p), out, m.cols);
      return;
    case WeightFormat::kQ4_0:
      dequantize_row_q4_0(reinterpret_cast<const BlockQ4_0*>(p), out, m.cols);
      return;
  }
}

namespace {

// Writes one f32 row in format `to`.
void encode_row(const float* x, int64_t cols, WeightFormat to, uint8_t* dst) {
  switch (to) {
    case WeightFormat::kF32:  // dst may be unaligned (tests misalign on purpose): copy bytes
      std::memcpy(dst, x, size_t(cols) * sizeof(float));
      return;
    case WeightFormat::kBF16:
      for (int64_t c = 0; c < cols; ++c) {
        const bf16 h = f32_to_bf16(x[c]);
        std::memcpy(dst + size_t(c) * sizeof(bf16), &h, sizeof(bf16));
      }
      return;
    case WeightFormat::kQ8_0:
      quantize_row_q8_0(x, reinterpret_cast<BlockQ8_0*>(dst), cols);
      return;
    case WeightFormat::kQ4_0:
      quantize_row_q4_0(x, reinterpret_cast<BlockQ4_0*>(dst), cols);
      return;
  }
}

}  // namespace

size_t quantize_matrix(const Matrix& src, WeightFormat to, uint8_t* dst, ThreadPool& pool) {
  INFER_CHECK(src.format == WeightFormat::kF32 || src.format == WeightFormat::kBF16,
              "quantize_matrix from %s", weight_format_name(src.format));
  INFER_CHECK(to == WeightFormat::kF32 || to == WeightFormat::kBF16 || src.cols % kQK == 0,
              "%s needs cols %% 32 == 0, got %lld", weight_format_name(to), (long long)src.cols);
  const size_t dst_stride = row_bytes(to, src.cols);
  // Load time, not the hot loop: one scratch row per chunk is fine.
  pool.parallel_for(src.rows, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(size_t(src.cols));
    for (int64_t r = r0; r < r1; ++r) {
      dequantize_row(src, r, row.data());
      encode_row(row.data(), src.cols, to, dst + size_t(r) * dst_stride);
    }
  });
  return size_t(src.rows) * dst_stride;
}

}  // namespace infer
