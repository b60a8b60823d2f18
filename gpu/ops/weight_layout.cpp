// The weights' device layout (shaders/common/weights.glsl says it in full): repacking rows into
// it at upload, and reading a repacked row back (tests).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "base/check.h"
#include "gpu/context.h"
#include "gpu/ops/matvec.h"
#include "model/quant.h"
#include "model/thread_pool.h"

namespace infer::gpu {
namespace {

constexpr int64_t kGroupCols = 256;  // Q8_0/Q4_0 columns a layout group holds (8 blocks)
constexpr int64_t kBf16GroupCols = 64;

int64_t div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Where column c of a row lives (common/weights.glsl): byte offsets in the row. Q4_0 also gives
// the nibble's shift.
size_t bf16_offset(int64_t c) {
  const int64_t j = 8 * (c / 64) + (c % 32) / 4, q = (c % 64) / 32;
  return size_t(16 * j + 8 * q + 2 * (c % 4));
}
size_t q8_offset(int64_t c) {
  const int64_t j = 16 * (c / 256) + (c % 64) / 4, q = (c % 256) / 64;
  return size_t(16 * j + 4 * q + c % 4);
}
// Q4_0: quad q's column e is byte e of word q / 2, low nibble for even q, high for odd, so that
// `word & 0x0f0f0f0f` and `(word >> 4) & 0x0f0f0f0f` are two quads as packed bytes (matvec_dot.comp).
size_t q4_offset(int64_t c, int* shift) {
  const int64_t j = 8 * (c / 256) + (c % 32) / 4, q = (c % 256) / 32, e = c % 4;
  *shift = int(4 * (q % 2));
  return size_t(16 * j + 4 * (q / 2) + e);
}
// Scale of block b (global in the row) after the row's quant vectors.
size_t scale_offset(WeightFormat f, int64_t cols, int64_t b) {
  const int64_t groups = div_up(cols, kGroupCols);
  const int64_t quant_vecs = groups * (f == WeightFormat::kQ8_0 ? 16 : 8);
  return size_t(16 * (quant_vecs + b / 8) + 2 * (b % 8));
}

}  // namespace

int64_t device_row_vectors(WeightFormat f, int64_t cols) {
  switch (f) {
    case WeightFormat::kF32:
      return div_up(cols, 4);
    case WeightFormat::kBF16:
      return div_up(cols, kBf16GroupCols) * 8;
    case WeightFormat::kQ8_0:
      return div_up(cols, kGroupCols) * 16;
    case WeightFormat::kQ4_0:
      return div_up(cols, kGroupCols) * 8;
  }
  return 0;
}

size_t device_row_bytes(WeightFormat f, int64_t cols) {
  switch (f) {
    case WeightFormat::kF32:
      return size_t(div_up(cols, 4)) * 16;
    case WeightFormat::kBF16:
      return size_t(div_up(cols, kBf16GroupCols)) * 8 * 16;
    case WeightFormat::kQ8_0:
      return size_t(div_up(cols, kGroupCols)) * 17 * 16;  // 16 quant vectors, 1 scale vector
    case WeightFormat::kQ4_0:
      return size_t(div_up(cols, kGroupCols)) * 9 * 16;  // 8 quant vectors, 1 scale vector
  }
  return 0;
}

void repack_rows(const Matrix& m, int64_t r0, int64_t n, uint8_t* dst) {
  const size_t out_bytes = device_row_bytes(m.format, m.cols);
  std::memset(dst, 0, out_bytes * size_t(n));  // padding: zero weights (zero scales)
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* src = m.row(r0 + i);
    uint8_t* out = dst + out_bytes * size_t(i);
    switch (m.format) {
      case WeightFormat::kF32:
        std::memcpy(out, src, size_t(m.cols) * 4);
        break;
      case WeightFormat::kBF16:
        for (int64_t c = 0; c < m.cols; ++c) std::memcpy(out + bf16_offset(c), src + 2 * c, 2);
        break;
      case WeightFormat::kQ8_0: {
        const auto* blocks = reinterpret_cast<const BlockQ8_0*>(src);
        for (int64_t b = 0; b < m.cols / kQK; ++b) {
          std::memcpy(out + scale_offset(m.format, m.cols, b), &blocks[b].d, 2);
          for (int k = 0; k < kQK; ++k) {
            std::memcpy(out + q8_offset(kQK * b + k), &blocks[b].qs[k], 1);
          }
        }
        break;
      }
      case WeightFormat::kQ4_0: {
        const auto* blocks = reinterpret_cast<const BlockQ4_0*>(src);
        for (int64_t b = 0; b < m.cols / kQK; ++b) {
          std::memcpy(out + scale_offset(m.format, m.cols, b), &blocks[b].d, 2);
          for (int k = 0; k < kQK; ++k) {
            const uint8_t byte = blocks[b].qs[k % 16];
            const uint8_t nibble = k < 16 ? byte & 0xf : byte >> 4;
            // The offset first: in `a[f(&s)] |= x << s` C++17 evaluates the right side first.
            int shift = 0;
            const size_t at = q4_offset(kQK * b + k, &shift);
            out[at] |= uint8_t(nibble << shift);
          }
        }
        break;
      }
    }
  }
}

void dequantize_device_row(WeightFormat f, int64_t cols, const uint8_t* row, float* out) {
  for (int64_t c = 0; c < cols; ++c) {
    switch (f) {
      case WeightFormat::kF32:
        std::memcpy(&out[c], row + 4 * c, 4);
        break;
      case WeightFormat::kBF16: {
        bf16 h;
        std::memcpy(&h, row + bf16_offset(c), 2);
        out[c] = bf16_to_f32(h);
        break;
      }
      case WeightFormat::kQ8_0: {
        fp16 d;
        std::memcpy(&d, row + scale_offset(f, cols, c / kQK), 2);
        out[c] = fp16_to_f32(d) * float(int8_t(row[q8_offset(c)]));
        break;
      }
      case WeightFormat::kQ4_0: {
        fp16 d;
        std::memcpy(&d, row + scale_offset(f, cols, c / kQK), 2);
        int shift = 0;
        const size_t at = q4_offset(c, &shift);
        const int nibble = (row[at] >> shift) & 0xf;
        out[c] = fp16_to_f32(d) * float(nibble - 8);
        break;
      }
    }
  }
}

Result<void> upload_rows(const VulkanContext& ctx, const Matrix& m, Buffer& dst,
                         VkDeviceSize offset, ThreadPool* pool) {
  const size_t out_bytes = device_row_bytes(m.format, m.cols);
  INFER_CHECK(offset + out_bytes * size_t(m.rows) <= dst.size(),
              "upload of %lld rows at %llu into \"%s\" (%llu bytes)", (long long)m.rows,
              (unsigned long long)offset, dst.name().c_str(), (unsigned long long)dst.size());
  // Chunks of ~16 MiB a thread keep the host copy small next to multi-GB tables. The repack is
  // a loop over every weight: on one core it was most of a 12B model's load (H200 host, 16
  // cores: 42 s of upload for 9.4 GB of Q4_0), so the pool's threads repack a chunk's rows side
  // by side and, where the buffer is mapped, copy their own rows in.
  const int threads = pool != nullptr ? pool->size() : 1;
  const int64_t chunk_rows =
      std::max<int64_t>(1, int64_t((size_t(16) << 20) * size_t(threads) / out_bytes));
  uint8_t* mapped = static_cast<uint8_t*>(dst.mapped());
  std::vector<uint8_t> chunk;
  for (int64_t r0 = 0; r0 < m.rows; r0 += chunk_rows) {
    const int64_t n = std::min(chunk_rows, m.rows - r0);
    chunk.resize(out_bytes * size_t(n));
    const VkDeviceSize at = offset + VkDeviceSize(out_bytes) * VkDeviceSize(r0);
    auto rows = [&](int64_t b, int64_t e) {
      uint8_t* part = chunk.data() + out_bytes * size_t(b);
      repack_rows(m, r0 + b, e - b, part);
      if (mapped != nullptr) std::memcpy(mapped + at + out_bytes * size_t(b), part, out_bytes * size_t(e - b));
    };
    if (pool != nullptr) {
      pool->parallel_for(n, rows);
    } else {
      rows(0, n);
    }
    if (mapped == nullptr) INFER_TRY_VOID(upload(ctx, dst, at, chunk.data(), chunk.size()));
  }
  return Ok{};
}

Result<GpuMatrix> upload_matrix(const VulkanContext& ctx, const Matrix& m, std::string name,
                                ThreadPool* pool) {
  if (m.rows <= 0 || m.cols <= 0 || m.data == nullptr) {
    return make_error(ErrorCode::kShape, name + ": empty matrix");
  }
  if ((m.format == WeightFormat::kQ8_0 || m.format == WeightFormat::kQ4_0) && m.cols % 32 != 0) {
    return make_error(ErrorCode::kShape, name + ": " + weight_format_name(m.format) + " needs " +
                                             "cols % 32 == 0, has " + std::to_string(m.cols));
  }
  GpuMatrix g;
  g.format = m.format;
  g.rows = m.rows;
  g.cols = m.cols;
  const VkDeviceSize bytes = VkDeviceSize(device_row_bytes(m.format, m.cols)) * VkDeviceSize(m.rows);
  INFER_TRY(g.buffer, Buffer::create(ctx, bytes, BufferKind::kDevice, std::move(name)));
  INFER_TRY_VOID(upload_rows(ctx, m, g.buffer, 0, pool));
  return g;
}

}  // namespace infer::gpu
