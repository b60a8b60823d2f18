// GPU token embedding and PLE inputs (gpu/ops/embed.h) vs the CPU: rows of every table format
// gathered by ids in a step buffer, and the PLE combine of model/forward_embed.cpp.
#include "gpu/ops/embed.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/half.h"
#include "model/matrix.h"
#include "model/ops/rms_norm.h"
#include "model/quant.h"
#include "shaders/step.h"
#include "test/gpu/gpu_test_env.h"
#include "test/gpu/op_test_buffers.h"

namespace infer::gpu {
namespace {

// A random [rows, cols] table in `format`, owning its bytes.
struct HostTable {
  std::vector<uint8_t> bytes;
  Matrix m;
};

HostTable random_table(WeightFormat format, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> f(static_cast<size_t>(cols));
  HostTable h;
  h.bytes.resize(size_t(rows) * row_bytes(format, cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : f) v = dist(rng);
    uint8_t* dst = h.bytes.data() + size_t(r) * row_bytes(format, cols);
    switch (format) {
      case WeightFormat::kF32:
        std::memcpy(dst, f.data(), size_t(cols) * 4);
        break;
      case WeightFormat::kBF16:
        for (int64_t c = 0; c < cols; ++c) {
          const bf16 b = f32_to_bf16(f[size_t(c)]);
          std::memcpy(dst + 2 * c, &b, 2);
        }
        break;
      case WeightFormat::kQ8_0:
        quantize_row_q8_0(f.data(), reinterpret_cast<BlockQ8_0*>(dst), cols);
        break;
      case WeightFormat::kQ4_0:
        quantize_row_q4_0(f.data(), reinterpret_cast<BlockQ4_0*>(dst), cols);
        break;
    }
  }
  h.m = Matrix{format, rows, cols, h.bytes.data()};
  return h;
}

// A step buffer as the host writes it (shaders/step.h): pos0, T, then the ids.
Buffer step_buffer(const VulkanContext& ctx, const std::vector<uint32_t>& ids) {
  std::vector<uint32_t> words(INFER_STEP_WORDS(ids.size()), 0);
  words[INFER_STEP_POS0] = 17;
  words[INFER_STEP_T] = uint32_t(ids.size());
  for (size_t t = 0; t < ids.size(); ++t) words[INFER_STEP_IDS + t] = ids[t];
  Buffer b = Buffer::create(ctx, words.size() * 4, BufferKind::kHost, "step").value();
  std::memcpy(b.mapped(), words.data(), words.size() * 4);
  return b;
}

class GpuEmbed : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (ctx_ == nullptr) return;
    ops_ = EmbedOps::create(*ctx_).value();
  }
  std::unique_ptr<EmbedOps> ops_;
};

// x[t] = table[min(ids[t], V - 1)] · scale. Decoding is exact on both sides (bf16 shifts, d·q in
// f32) and the scale one f32 product, so the results are equal, not just close.
void check_embed(const VulkanContext& ctx, const EmbedOps& ops, WeightFormat format, int64_t V,
                 int64_t H, const std::vector<uint32_t>& ids) {
  SCOPED_TRACE(std::string(weight_format_name(format)) + " V " + std::to_string(V) + " H " +
               std::to_string(H) + " T " + std::to_string(ids.size()));
  const HostTable h = random_table(format, V, H, uint32_t(V * 131 + H));
  const float scale = 39.25f;
  const uint32_t T = uint32_t(ids.size());
  GpuMatrix table = upload_matrix(ctx, h.m, "table").value();
  const Buffer step = step_buffer(ctx, ids);
  const Buffer xb = to_device(ctx, std::vector<float>(size_t(T * H), NAN), "x");
  auto r = run_recording(ctx, [&](Recorder& rec) {
    return ops.embed(rec, Binding{&step}, table, scale, Binding{&xb}, T);
  });
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::vector<float> x = from_device<float>(ctx, xb, size_t(T * H));
  std::vector<float> row(static_cast<size_t>(H));
  int bad = 0;
  for (uint32_t t = 0; t < T; ++t) {
    dequantize_row(h.m, std::min<int64_t>(ids[t], V - 1), row.data());
    for (int64_t j = 0; j < H; ++j) {
      const float want = row[size_t(j)] * scale, got = x[size_t(t * H + j)];
      if (got != want && ++bad <= 5) {
        ADD_FAILURE() << "x[" << t << ", " << j << "] = " << got << ", reference " << want;
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST_F(GpuEmbed, EmbedGathersF32AndBf16Rows) {
  for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kBF16}) {
    for (int64_t H : {1, 7, 33, 1536, 5376}) {
      check_embed(*ctx_, *ops_, f, 40, H, {5});
      check_embed(*ctx_, *ops_, f, 40, H, {0, 39, 5, 5, 12, 2, 31});  // repeats, both ends
    }
  }
}

TEST_F(GpuEmbed, EmbedGathersQuantizedRows) {
  for (WeightFormat f : {WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
    for (int64_t H : {32, 96, 1536}) {
      check_embed(*ctx_, *ops_, f, 40, H, {7});
      check_embed(*ctx_, *ops_, f, 40, H, {0, 39, 7, 7, 3});
    }
  }
}

// An id past the table (a host bug) reads the last row instead of memory past the buffer.
TEST_F(GpuEmbed, EmbedClampsIdsPastTheTable) {
  check_embed(*ctx_, *ops_, WeightFormat::kBF16, 10, 64, {3, 10, 4000000000u});
}

// ple[r] = (rmsnorm(proj[r]·proj_scale)·norm_w + rows[r]·ple_scale)·2^(-1/2), r = t·L + l,
// as model/forward_embed.cpp computes it.
void check_ple_inputs(const VulkanContext& ctx, const EmbedOps& ops, uint32_t T, uint32_t L,
                      uint32_t P, bool in_place) {
  SCOPED_TRACE("T " + std::to_string(T) + " L " + std::to_string(L) + " P " + std::to_string(P) +
               (in_place ? " in place" : ""));
  const size_t n = size_t(T) * L * P;
  std::mt19937 rng(T * 7 + L * 3 + P);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> proj(n), rows(n), norm_w(P);
  for (float& v : proj) v = dist(rng) * 30.0f;
  for (float& v : rows) v = dist(rng);
  for (float& v : norm_w) v = 1.0f + 0.5f * dist(rng);
  const float proj_scale = float(1.0 / std::sqrt(1536.0)), ple_scale = 16.0f, eps = 1e-6f;
  const float combine = float(1.0 / std::sqrt(2.0));

  std::vector<float> scaled(n), normed(n), want(n), scale(n);
  for (size_t i = 0; i < n; ++i) scaled[i] = proj[i] * proj_scale;
  rms_norm(scaled.data(), norm_w.data(), int64_t(T) * L, P, eps, normed.data());
  for (size_t i = 0; i < n; ++i) {
    want[i] = (normed[i] + rows[i] * ple_scale) * combine;
    scale[i] = (std::fabs(normed[i]) + std::fabs(rows[i] * ple_scale)) * combine;
  }

  const Buffer pb = to_device(ctx, proj, "proj");
  const Buffer wb = to_device(ctx, norm_w, "norm_w");
  const Buffer rb = to_device(ctx, rows, "rows");
  const Buffer ob = to_device(ctx, std::vector<float>(n, NAN), "ple");
  const Buffer& out = in_place ? pb : ob;
  auto r = run_recording(ctx, [&](Recorder& rec) {
    return ops.ple_inputs(rec, Binding{&pb}, proj_scale, Binding{&wb}, Binding{&rb}, ple_scale,
                          Binding{&out}, T, L, P, eps);
  });
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::vector<float> got = from_device<float>(ctx, out, n);
  // f32 sums of squares against the reference's double ones, then three roundings: relative
  // errors of a few 1e-7 of each term's magnitude; 1e-5 leaves a wide margin.
  int bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const double tol = 1e-5 * scale[i] + 1e-30;
    if (!(std::fabs(double(got[i]) - want[i]) <= tol) && ++bad <= 5) {
      ADD_FAILURE() << "ple[" << i << "] = " << got[i] << ", reference " << want[i];
    }
  }
  EXPECT_EQ(bad, 0) << "of " << n;
}

TEST_F(GpuEmbed, PleInputsMatchCpuReference) {
  for (uint32_t P : {1u, 7u, 256u}) {
    check_ple_inputs(*ctx_, *ops_, 1, 1, P, false);
    check_ple_inputs(*ctx_, *ops_, 3, 35, P, false);
  }
  check_ple_inputs(*ctx_, *ops_, 2, 5, 256, true);
}

}  // namespace
}  // namespace infer::gpu
