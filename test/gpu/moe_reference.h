// The CPU reference of the GPU MoE tests (moe_test.cpp), built from the model's ops as
// model/forward_moe.cpp uses them (rms_norm, matmul_reference, softmax, moe_top_k, gelu_mul;
// GEMMA4_TEXT.md §4.9), with the tolerances the GPU results are held to.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

#include "model/forward_blocks.h"
#include "model/matrix.h"
#include "model/ops/gelu.h"
#include "model/ops/matmul.h"
#include "model/ops/rms_norm.h"
#include "model/ops/softmax.h"
#include "test/gpu/host_matrix.h"

namespace infer::gpu {

inline constexpr float kMoeEps = 1e-6f;


struct Routing {
  std::vector<int32_t> idx;  // [T, k]
  std::vector<float> w;      // [T, k]
  std::vector<float> w_tol;  // [T, k]: how far the GPU's weight may be from w
};

// x: [T, H], router [E, H] -> idx, w: [T, k], as model/forward_moe.cpp routes.
inline Routing route_reference(const std::vector<float>& x, const Matrix& router,
                               const std::vector<float>& scale,
                               const std::vector<float>& per_expert, int64_t T, int64_t k) {
  const int64_t H = router.cols, E = router.rows;
  std::vector<float> xn(x.size()), logits(size_t(T * E));
  const float inv_sqrt_h = float(1.0 / std::sqrt(double(H)));
  rms_norm(x.data(), nullptr, T, H, kMoeEps, xn.data());
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < H; ++j) {
      xn[size_t(t * H + j)] = xn[size_t(t * H + j)] * scale[size_t(j)] * inv_sqrt_h;
    }
  }
  matmul_reference(router, xn.data(), T, logits.data());
  Routing r;
  r.idx.resize(size_t(T * k));
  r.w.resize(size_t(T * k));
  r.w_tol.resize(size_t(T * k));
  // Logit error: the GPU's dot product (c · Σ|terms|, c as in matvec_test) plus its own f32 norm
  // factor (Σx² over H terms, the same c relative). Softmax turns a logit error δ into a relative
  // probability error of at most 2δ; the renormalisation doubles it again.
  const double c = 8.0 * FLT_EPSILON * std::sqrt(double(H));
  std::vector<float> row(static_cast<size_t>(H));
  for (int64_t t = 0; t < T; ++t) {
    double max_dl = 0;
    for (int64_t e = 0; e < E; ++e) {
      dequantize_row(router, e, row.data());
      double s = 0;
      for (int64_t j = 0; j < H; ++j)
        s += std::fabs(double(row[size_t(j)]) * xn[size_t(t * H + j)]);
      max_dl = std::max(max_dl, c * s + c * std::fabs(logits[size_t(t * E + e)]));
    }
    softmax(&logits[size_t(t * E)], E);
    moe_top_k(&logits[size_t(t * E)], E, k, per_expert.data(), &r.idx[size_t(t * k)],
          &r.w[size_t(t * k)]);
    for (int64_t j = 0; j < k; ++j) {
      r.w_tol[size_t(t * k + j)] =
          float(std::fabs(r.w[size_t(t * k + j)]) * (4.0 * max_dl + 64.0 * FLT_EPSILON));
    }
  }
  return r;
}

struct Experts {
  std::vector<HostMatrix> gate_up;  // E x [2I, H]
  std::vector<HostMatrix> down;     // E x [H, I]
};

inline std::vector<Matrix> matrices(const std::vector<HostMatrix>& h) {
  std::vector<Matrix> m;
  for (const HostMatrix& x : h) m.push_back(x.m);
  return m;
}

// out[t] = Σ_j w[t, j] · down_e(gelu(gate_e · x2[t]) ⊙ (up_e · x2[t])), with a tolerance per
// output: each GPU dot product errs by up to c·Σ|terms| (c as in matvec_test); act = gelu(g)·u
// moves by 1.13·|u|·δg + |g|·δu (|gelu'| <= 1.13, |gelu(g)| <= |g|) plus a few ulps of |g·u|; down
// carries its own c·Σ|d·act| and Σ|d|·δact; the weights their w_tol times |y|.
inline void experts_reference(const Experts& ex, const std::vector<float>& x2, const Routing& r,
                              int64_t T, int64_t k, std::vector<float>* out,
                              std::vector<double>* tol) {
  const int64_t I = ex.down[0].m.cols, H = ex.down[0].m.rows;
  const double cH = 8.0 * FLT_EPSILON * std::sqrt(double(H));
  const double cI = 8.0 * FLT_EPSILON * std::sqrt(double(I));
  out->assign(size_t(T * H), 0.0f);
  tol->assign(size_t(T * H), 1e-30);
  const size_t n_i = static_cast<size_t>(I), n_h = static_cast<size_t>(H);
  std::vector<float> gu(2 * n_i), act(n_i), y(n_h), row(std::max(n_h, n_i));
  std::vector<double> act_err(n_i);
  for (int64_t t = 0; t < T; ++t) {
    const float* xt = &x2[size_t(t * H)];
    for (int64_t j = 0; j < k; ++j) {
      const size_t p = size_t(t * k + j);
      const int32_t e = r.idx[p];
      const Matrix& gum = ex.gate_up[size_t(e)].m;
      const Matrix& dm = ex.down[size_t(e)].m;
      matmul_reference(gum, xt, 1, gu.data());
      gelu_mul(gu.data(), gu.data() + I, I, act.data());
      matmul_reference(dm, act.data(), 1, y.data());
      for (int64_t i = 0; i < I; ++i) {
        double sg = 0, su = 0;
        dequantize_row(gum, i, row.data());
        for (int64_t c = 0; c < H; ++c) sg += std::fabs(double(row[size_t(c)]) * xt[c]);
        dequantize_row(gum, I + i, row.data());
        for (int64_t c = 0; c < H; ++c) su += std::fabs(double(row[size_t(c)]) * xt[c]);
        const double g = std::fabs(gu[size_t(i)]), u = std::fabs(gu[size_t(I + i)]);
        act_err[size_t(i)] = 1.13 * u * cH * sg + g * cH * su + 32.0 * FLT_EPSILON * g * u;
      }
      for (int64_t h = 0; h < H; ++h) {
        dequantize_row(dm, h, row.data());
        double s = 0, prop = 0;
        for (int64_t i = 0; i < I; ++i) {
          s += std::fabs(double(row[size_t(i)]) * act[size_t(i)]);
          prop += std::fabs(double(row[size_t(i)])) * act_err[size_t(i)];
        }
        const size_t o = size_t(t * H + h);
        (*out)[o] += r.w[p] * y[size_t(h)];
        (*tol)[o] += std::fabs(r.w[p]) * (cI * s + prop) + r.w_tol[p] * std::fabs(y[size_t(h)]) +
                     4.0 * FLT_EPSILON * std::fabs(r.w[p] * y[size_t(h)]);
      }
    }
  }
}

}  // namespace infer::gpu
