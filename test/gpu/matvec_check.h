// Checks shared by the GPU matrix-vector tests (matvec_test.cpp, matvec_dot_test.cpp): one
// product on the GPU against the CPU reference of the path it took (f32 activations, f16 on the
// cooperative-matrix kernel, int8 on the integer-dot kernel), with tolerances argued below.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/context.h"
#include "gpu/ops/matvec.h"
#include "gpu/recorder.h"
#include "model/matrix.h"
#include "model/ops/gelu.h"
#include "model/ops/matmul.h"
#include "model/quant.h"
#include "test/gpu/host_matrix.h"

namespace infer {
// Test output names the format ("q4_0") rather than its bytes.
inline void PrintTo(WeightFormat f, std::ostream* os) { *os << weight_format_name(f); }
}  // namespace infer

namespace infer::gpu {

// The reference sums in double, the GPU in f32 in its own order (per-invocation partial sums, then
// subgroupAdd, then the parts of a split row in shared memory). Each f32 addition errs by at most
// eps/2 of the running magnitude, bounded by S = sum_c |w_rc * x_tc|; rounding errors of n terms
// add up like a random walk, ~sqrt(n) * eps/2 * S. Weights decode exactly (bf16 shifts, d * q in
// f32 on both sides), so this is the whole error; 8x margin.
// On the cooperative-matrix kernel (products_in_f16, shaders/matmul_coopmat.comp) activations and
// weights are each rounded once to f16 (2^-11 of itself, or 2^-25 absolute where subnormal), so a
// product errs by up to 2^-10 of itself plus 2^-24 (|w_c| + |x_c|): 2^-10 · S + 2^-24 · that sum
// more.
inline void expect_matches_reference(const Matrix& w, const std::vector<float>& x, int64_t T,
                                     const std::vector<float>& y_gpu, bool f16 = false) {
  std::vector<float> y_ref(size_t(T * w.rows));
  matmul_reference(w, x.data(), T, y_ref.data());
  std::vector<float> row(size_t(w.cols));
  int bad = 0;
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w, r, row.data());
    for (int64_t t = 0; t < T; ++t) {
      double abs_sum = 0, factors = 0;
      for (int64_t c = 0; c < w.cols; ++c) {
        abs_sum += std::fabs(double(row[c]) * x[t * w.cols + c]);
        factors += std::fabs(double(row[c])) + std::fabs(double(x[t * w.cols + c]));
      }
      double f16_tol = 0.0;
      if (f16) f16_tol = std::ldexp(abs_sum, -10) + std::ldexp(factors, -24);
      const double tol = 8.0 * FLT_EPSILON * std::sqrt(double(w.cols)) * abs_sum + f16_tol + 1e-30;
      const float got = y_gpu[size_t(t * w.rows + r)], want = y_ref[size_t(t * w.rows + r)];
      if (!(std::fabs(double(got) - want) <= tol) && ++bad <= 5) {
        ADD_FAILURE() << weight_format_name(w.format) << " y[t=" << t << ", r=" << r
                      << "] = " << got << ", reference " << want << ", tolerance " << tol;
      }
    }
  }
  EXPECT_EQ(bad, 0) << "of " << T * w.rows << " outputs";
}

// The integer-dot kernel (activations_in_int8) against matmul_reference_q8_x, the CPU's int8
// contract: x quantized per block of 32 the CPU's way, so each block dot is an exact integer on
// both sides (the GPU quantizes bit for bit like the CPU, common/quant_x.glsl) and only the f32
// sum of dot · d_w · d_x differs: per-term roundings (the scale product, the product) and the
// running sum, bounded as above with S = sum_c |q_w · q_x| · d_w · d_x. One quantized activation
// off by one moves y by d_w · d_x · |q_w|, above this bound on the short rows of these shapes.
inline void expect_matches_int8_reference(const Matrix& w, const std::vector<float>& x,
                                          int64_t T, const std::vector<float>& y_gpu) {
  std::vector<float> y_ref(size_t(T * w.rows));
  matmul_reference_q8_x(w, x.data(), T, y_ref.data());
  const int64_t nb = w.cols / kQK;
  std::vector<BlockQ8_0> xq(size_t(T * nb));
  for (int64_t t = 0; t < T; ++t) {
    quantize_row_q8_0(&x[size_t(t * w.cols)], &xq[size_t(t * nb)], w.cols);
  }
  std::vector<float> row(size_t(w.cols));
  int bad = 0;
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w, r, row.data());  // d_w · q_w
    for (int64_t t = 0; t < T; ++t) {
      double abs_sum = 0;
      for (int64_t c = 0; c < w.cols; ++c) {
        const BlockQ8_0& b = xq[size_t(t * nb + c / kQK)];
        abs_sum += std::fabs(double(row[c]) * fp16_to_f32(b.d) * b.qs[c % kQK]);
      }
      const double tol = 8.0 * FLT_EPSILON * std::sqrt(double(w.cols)) * abs_sum + 1e-30;
      const float got = y_gpu[size_t(t * w.rows + r)], want = y_ref[size_t(t * w.rows + r)];
      if (!(std::fabs(double(got) - want) <= tol) && ++bad <= 5) {
        ADD_FAILURE() << weight_format_name(w.format) << " (int8 x) y[t=" << t << ", r=" << r
                      << "] = " << got << ", reference " << want << ", tolerance " << tol;
      }
    }
  }
  EXPECT_EQ(bad, 0) << "of " << T * w.rows << " outputs";
}

// Runs one product on the GPU and checks it against the reference of the path it took; returns
// whether that was the integer-dot kernel.
// As check_matvec_x on an op already created (matvec_test.cpp shares them between shapes).
inline bool check_matvec_op(const VulkanContext& ctx, const MatvecOp& op, int64_t rows,
                            int64_t cols, int64_t T, const std::vector<float>& x) {
  const HostMatrix h = random_matrix(op.format(), rows, cols, uint32_t(rows * 7919 + cols));
  auto w = upload_matrix(ctx, h.m, "w");
  EXPECT_TRUE(w.ok()) << w.error().message;
  if (!w.ok()) return false;
  std::vector<float> y(size_t(T * rows), NAN);
  auto r = run_matvec(ctx, op, *w, x.data(), T, y.data());
  EXPECT_TRUE(r.ok()) << r.error().message;
  const bool int8 = op.activations_in_int8(rows, cols, uint32_t(T));
  if (int8) {
    expect_matches_int8_reference(h.m, x, T, y);
  } else {
    expect_matches_reference(h.m, x, T, y, op.products_in_f16(rows, cols, uint32_t(T)));
  }
  return int8;
}

inline bool check_matvec_x(const VulkanContext& ctx, WeightFormat format, int64_t rows,
                           int64_t cols, int64_t T, const std::vector<float>& x,
                           MatvecTuning tuning) {
  auto op = MatvecOp::create(ctx, format, tuning);
  EXPECT_TRUE(op.ok()) << op.error().message;
  if (!op.ok()) return false;
  return check_matvec_op(ctx, **op, rows, cols, T, x);
}

inline void check_matvec(const VulkanContext& ctx, WeightFormat format, int64_t rows,
                         int64_t cols, int64_t T, MatvecTuning tuning = {}) {
  SCOPED_TRACE(std::string(weight_format_name(format)) + " rows " + std::to_string(rows) +
               " cols " + std::to_string(cols) + " T " + std::to_string(T));
  const std::vector<float> x = random_vector(size_t(T * cols), uint32_t(cols + T));
  check_matvec_x(ctx, format, rows, cols, T, x, tuning);
}

struct Shape {
  int64_t rows, cols, T;
};

inline void PrintTo(const Shape& s, std::ostream* os) {
  *os << "rows " << s.rows << " cols " << s.cols << " T " << s.T;
}

// Rows 1, 7, 33, 257 leave the last row group partial; T = 3 and 5 leave the last token group
// partial (4 a group by default), T = 8 fills two; 4096 x 1536 and 1536 x 4096 are model-sized,
// long rows split over several subgroups (matvec.comp). T = 200: the tiled kernels (cooperative
// matrices where the device has them) on the e2b-long fixture's shapes: 32 and 64 columns, 16 to
// 512 rows, a partial last token tile.
inline constexpr Shape kMatvecShapes[] = {
    {1, 32, 1},   {7, 64, 1},   {33, 96, 1},     {257, 1024, 1},  {64, 4096, 1},
    {4096, 1536, 1}, {1536, 4096, 1}, {33, 128, 3}, {20, 256, 5}, {130, 512, 8}};
inline constexpr Shape kTiledShapes[] = {{16, 64, 200}, {512, 64, 200}, {192, 64, 200},
                                         {64, 32, 200}};

inline std::string shape_name(WeightFormat f, const Shape& s) {
  std::string n = weight_format_name(f);
  n[0] = char(std::toupper(n[0]));
  n.erase(std::remove(n.begin(), n.end(), '_'), n.end());
  return n + "Rows" + std::to_string(s.rows) + "Cols" + std::to_string(s.cols) + "T" +
         std::to_string(s.T);
}

// act = gelu(G·x) ⊙ (U·x) on the GPU through kernels k (gate-up): x [T, H], gate and up [I, H],
// act [T, I]. Empty on a failure (reported).
inline std::vector<float> run_gate_up(const VulkanContext& ctx, const MatvecKernels& k,
                                      const Matrix& gate, const Matrix& up,
                                      const std::vector<float>& x, int64_t T) {
  auto g = upload_matrix(ctx, gate, "gate");
  auto u = upload_matrix(ctx, up, "up");
  EXPECT_TRUE(g.ok() && u.ok());
  if (!g.ok() || !u.ok()) return {};
  const size_t x_bytes = x.size() * 4, y_bytes = size_t(T * gate.rows) * 4;
  auto xb = Buffer::create(ctx, x_bytes, BufferKind::kDevice, "x");
  auto yb = Buffer::create(ctx, y_bytes, BufferKind::kDevice, "act");
  auto rec = Recorder::create(ctx);
  EXPECT_TRUE(xb.ok() && yb.ok() && rec.ok());
  if (!xb.ok() || !yb.ok() || !rec.ok()) return {};
  std::vector<float> act(size_t(T * gate.rows));
  const bool ok = upload(ctx, *xb, 0, x.data(), x_bytes).ok() && (*rec)->begin().ok() &&
                  record_matvec_kernels(**rec, k, *g, &*u, Binding{&*xb}, Binding{&*yb},
                                        uint32_t(T)).ok() &&
                  (*rec)->submit_and_wait().ok() &&
                  download(ctx, *yb, 0, act.data(), y_bytes).ok();
  EXPECT_TRUE(ok);
  return ok ? act : std::vector<float>();
}

// act against the CPU's gelu_mul(G·x, U·x) (matmul_reference in double) on x as the kernel saw
// it, with test/gpu/mlp_test.cpp's bound: each sum within c·S (as expect_matches_reference),
// carried through gelu' <= 1.13 and the product, plus the gelu evaluations' own rounding.
// extra_rel widens c for kernels with coarser products (the cooperative-matrix kernel's f16).
inline void expect_gate_up_matches(const Matrix& gate, const Matrix& up,
                                   const std::vector<float>& x, int64_t T,
                                   const std::vector<float>& act, double extra_rel = 0.0) {
  const int64_t I = gate.rows, H = gate.cols;
  ASSERT_EQ(act.size(), size_t(T * I));
  std::vector<float> g_ref(act.size()), u_ref(act.size()), act_ref(act.size());
  matmul_reference(gate, x.data(), T, g_ref.data());
  matmul_reference(up, x.data(), T, u_ref.data());
  gelu_mul(g_ref.data(), u_ref.data(), T * I, act_ref.data());
  const double c = 8.0 * FLT_EPSILON * std::sqrt(double(H)) + extra_rel;
  std::vector<float> grow(static_cast<size_t>(H)), urow(static_cast<size_t>(H));
  int bad = 0;
  for (int64_t i = 0; i < I; ++i) {
    dequantize_row(gate, i, grow.data());
    dequantize_row(up, i, urow.data());
    for (int64_t t = 0; t < T; ++t) {
      double sg = 0, su = 0;
      for (int64_t h = 0; h < H; ++h) {
        sg += std::fabs(double(grow[h]) * x[size_t(t * H + h)]);
        su += std::fabs(double(urow[h]) * x[size_t(t * H + h)]);
      }
      const size_t o = size_t(t * I + i);
      const double gv = std::fabs(g_ref[o]), uv = std::fabs(u_ref[o]);
      const double tol = 1.13 * uv * c * sg + gv * c * su + 32.0 * FLT_EPSILON * gv * uv + 1e-30;
      if (!(std::fabs(double(act[o]) - act_ref[o]) <= tol) && ++bad <= 5) {
        ADD_FAILURE() << "act[t=" << t << ", i=" << i << "] = " << act[o] << ", reference "
                      << act_ref[o] << ", tolerance " << tol;
      }
    }
  }
  EXPECT_EQ(bad, 0) << "of " << T * I << " outputs";
}

}  // namespace infer::gpu
