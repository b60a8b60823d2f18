// A weight matrix [rows, cols] (= [out, in], PyTorch nn.Linear layout) in a format the kernels
// read: f32, bf16 (mmapped from the checkpoint as is), or GGML Q8_0/Q4_0 blocks along each row.
#pragma once

#include <cstddef>
#include <cstdint>

namespace infer {

class ThreadPool;

enum class WeightFormat { kF32, kBF16, kQ8_0, kQ4_0 };

const char* weight_format_name(WeightFormat f);
// Bytes of one row of `cols` weights; Q8_0/Q4_0 need cols % 32 == 0.
size_t row_bytes(WeightFormat f, int64_t cols);

struct Matrix {
  WeightFormat format = WeightFormat::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const uint8_t* data = nullptr;  // rows * row_bytes(format, cols) bytes, row-major

  size_t stride() const { return row_bytes(format, cols); }
  const uint8_t* row(int64_t r) const { return data + size_t(r) * stride(); }
  size_t nbytes() const { return size_t(rows) * stride(); }
};

// out: [m.cols] f32 <- row r of m, dequantized (embedding lookups, references, tests).
void dequantize_row(const Matrix& m, int64_t r, float* out);

// Quantizes src (f32 or bf16) into `to` at dst (src.rows * row_bytes(to, src.cols) bytes), rows
// split over every pool thread (load time). Returns the bytes written. kF32/kBF16 convert.
size_t quantize_matrix(const Matrix& src, WeightFormat to, uint8_t* dst, ThreadPool& pool);

}  // namespace infer
