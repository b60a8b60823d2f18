// Association keys from pre-RoPE K rows, and the dual score (association.h).
#include "memory/association.h"

#include "memory/association_kernels.h"
#include "memory/splitmix.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "base/check.h"

namespace infer::memory {
namespace {

// A Gaussian matrix [rows, cols] drawn row by row, stored transposed ([cols, rows]) for matvec.
std::vector<float> gaussian_matrix_t(size_t rows, size_t cols, uint64_t seed) {
  SplitMix64 r{seed};
  std::vector<float> m(rows * cols);
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j) m[j * rows + i] = r.gaussian();
  return m;
}

void make_unit(float* x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += double(x[i]) * x[i];
  const float inv = s > 0 ? float(1.0 / std::sqrt(s)) : 0.0f;
  for (size_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace

Association::Association(const AssociationConfig& cfg, std::vector<int> row_floats,
                         std::vector<int> head_dim)
    : cfg_(cfg), row_floats_(std::move(row_floats)), head_dim_(std::move(head_dim)) {
  INFER_CHECK(!row_floats_.empty() && row_floats_.size() == head_dim_.size(),
              "association: layer shapes");
  n_layers_ = int(row_floats_.size());
  if (cfg_.max_layers > 0) n_layers_ = std::min(n_layers_, cfg_.max_layers);
  for (int l = 0; l < n_layers_; ++l)
    INFER_CHECK(head_dim_[l] > 0 && row_floats_[l] % head_dim_[l] == 0, "association: head dim");
  INFER_CHECK(cfg_.dims > 0 && cfg_.sub_spans > 0 && cfg_.reduce_dims > 0, "association: dims");
  INFER_CHECK(cfg_.query_parts > 0 && cfg_.query_part_tokens > 0, "association: query parts");
  INFER_CHECK(cfg_.lift_active >= 0 && cfg_.lift_active <= cfg_.lift_dims, "association: lift");
  const size_t in = in_floats(), red = size_t(cfg_.reduce_dims);
  p1_ = gaussian_matrix_t(red, in, cfg_.seed);
  const size_t p2_cols = cfg_.lift_active > 0 ? size_t(cfg_.lift_dims) : red;
  if (cfg_.lift_active > 0) lift_ = gaussian_matrix_t(size_t(cfg_.lift_dims), red, cfg_.seed + 1);
  p2_ = gaussian_matrix_t(size_t(cfg_.dims), p2_cols, cfg_.seed + 2);
}

size_t Association::in_floats() const {
  size_t in = 0;
  for (int l = 0; l < n_layers_; ++l) in += size_t(row_floats_[l]);
  return in;
}

// Steps 1-3 for tokens [t0, t0 + n) of b: reduced [n, reduce_dims], each unit. x is scratch.
void Association::features(const KvBlock& b, size_t t0, size_t n, float* reduced,
                           std::vector<float>& x, ThreadPool* pool) const {
  const size_t in = in_floats(), red = size_t(cfg_.reduce_dims);
  x.resize(n * in);
  for (size_t j = 0; j < n; ++j) {
    const size_t t = t0 + j;
    float* xt = x.data() + j * in;
    size_t o = 0;
    for (int l = 0; l < n_layers_; ++l) {
      const size_t rf = size_t(row_floats_[l]), d = size_t(head_dim_[l]);
      INFER_CHECK(b.k[size_t(l)].size() >= (t + 1) * rf, "association: block rows");
      const float* k = b.k[size_t(l)].data() + t * rf;
      for (size_t h = 0; h < rf; h += d) {
        std::copy(k + h, k + h + d, xt + o + h);
        make_unit(xt + o + h, d);
      }
      o += rf;
    }
    if (!mean_.empty()) {
      for (size_t i = 0; i < in; ++i) xt[i] -= mean_[i];
    }
    make_unit(xt, in);
  }
  matmul_t(p1_.data(), red, in, x.data(), n, in, reduced, red, pool);
  for (size_t j = 0; j < n; ++j) make_unit(reduced + j * red, red);
}

// Each token's step-4 units (lift) or reduced vector (no lift), tokens [t0, t0 + n) in order,
// kTokenBlock at a time (the projections read once a block).
template <class F>
void Association::for_each_token(const KvBlock& b, size_t t0, size_t n, ThreadPool* pool,
                                 F&& f) const {
  constexpr size_t kTokenBlock = 16;
  const size_t red = size_t(cfg_.reduce_dims), L = size_t(cfg_.lift_dims);
  const bool lift = cfg_.lift_active > 0;
  std::vector<float> x, reduced(std::min(n, kTokenBlock) * red), lifted;
  std::vector<int> active;
  if (lift) lifted.resize(std::min(n, kTokenBlock) * L);
  for (size_t b0 = 0; b0 < n; b0 += kTokenBlock) {
    const size_t m = std::min(kTokenBlock, n - b0);
    features(b, t0 + b0, m, reduced.data(), x, pool);
    if (lift) matmul_t(lift_.data(), L, red, reduced.data(), m, red, lifted.data(), L, pool);
    for (size_t j = 0; j < m; ++j) {
      if (lift) largest_units(lifted.data() + j * L, L, size_t(cfg_.lift_active), active);
      f(reduced.data() + j * red, active);
    }
  }
}

void Association::fit(const KvBlock& b) {
  INFER_CHECK(b.size() > 0 && b.k.size() >= size_t(n_layers_), "association: fit on no rows");
  const size_t in = in_floats(), n = b.size();
  mean_.clear();
  std::vector<double> sum(in, 0.0);
  // The mean of the unit-head vectors, before any centring (mean_ empty here).
  for (size_t t = 0; t < n; ++t) {
    size_t o = 0;
    for (int l = 0; l < n_layers_; ++l) {
      const size_t rf = size_t(row_floats_[l]), d = size_t(head_dim_[l]);
      std::vector<float> row(b.k[size_t(l)].begin() + ptrdiff_t(t * rf),
                             b.k[size_t(l)].begin() + ptrdiff_t((t + 1) * rf));
      for (size_t h = 0; h < rf; h += d) make_unit(row.data() + h, d);
      for (size_t i = 0; i < rf; ++i) sum[o + i] += row[i];
      o += rf;
    }
  }
  mean_.resize(in);
  for (size_t i = 0; i < in; ++i) mean_[i] = float(sum[i] / double(n));
  // Expected per-token contribution of each unit (counts or reduced values).
  const bool lift = cfg_.lift_active > 0;
  const size_t units = lift ? size_t(cfg_.lift_dims) : size_t(cfg_.reduce_dims);
  std::vector<double> f(units, 0.0);
  for_each_token(b, 0, n, nullptr, [&](const float* reduced, const std::vector<int>& active) {
    if (lift) {
      for (int u : active) f[size_t(u)] += 1.0;
    } else {
      for (size_t i = 0; i < units; ++i) f[i] += reduced[i];
    }
  });
  freq_.resize(units);
  for (size_t i = 0; i < units; ++i) freq_[i] = float(f[i] / double(n));
}

std::vector<float> Association::state() const {
  std::vector<float> s(mean_);
  s.insert(s.end(), freq_.begin(), freq_.end());
  return s;
}

size_t Association::state_floats() const {
  return in_floats() +
         (cfg_.lift_active > 0 ? size_t(cfg_.lift_dims) : size_t(cfg_.reduce_dims));
}

Result<void> Association::set_state(std::span<const float> s) {
  if (s.size() != state_floats()) {
    return Error{ErrorCode::kInvalidArgument,
                 "association state has " + std::to_string(s.size()) + " floats, expected " +
                     std::to_string(state_floats())};
  }
  mean_.assign(s.begin(), s.begin() + ptrdiff_t(in_floats()));
  freq_.assign(s.begin() + ptrdiff_t(in_floats()), s.end());
  return {};
}

void Association::rows_key(const KvBlock& b, size_t i0, size_t n, float* out,
                           ThreadPool* pool) const {
  const bool lift = cfg_.lift_active > 0;
  const size_t units = freq_.size();
  std::vector<float> acc(units);
  for (size_t i = 0; i < units; ++i) acc[i] = -float(n) * freq_[i];
  for_each_token(b, i0, n, pool, [&](const float* reduced, const std::vector<int>& active) {
    if (lift) {
      for (int u : active) acc[size_t(u)] += 1.0f;
    } else {
      for (size_t i = 0; i < units; ++i) acc[i] += reduced[i];
    }
  });
  matvec_t(p2_.data(), size_t(cfg_.dims), units, acc.data(), out);
  make_unit(out, size_t(cfg_.dims));
}

void Association::ids_key(const KvBlock& b, size_t i0, size_t n, float* out) const {
  const size_t D = size_t(cfg_.dims);
  std::fill(out, out + D, 0.0f);
  auto add = [&](uint64_t feature) {
    const uint64_t h = SplitMix64{cfg_.seed ^ feature}.next();
    out[(h >> 1) % D] += (h & 1) ? 1.0f : -1.0f;
  };
  for (size_t t = i0; t < i0 + n; ++t) {
    const uint64_t id = uint32_t(b.ids[t]);
    add(id);
    if (t > i0) add((uint64_t(uint32_t(b.ids[t - 1])) << 32 | id) * 0x9e3779b97f4a7c15ULL + 1);
  }
  make_unit(out, D);
}

void Association::span_key(const KvBlock& b, size_t i0, size_t n, float* out,
                           ThreadPool* pool) const {
  INFER_CHECK(fitted(), "association: keys before fit()");
  INFER_CHECK(n > 0 && i0 + n <= b.size() && b.ids.size() == b.size(),
              "association: span out of the block");
  const size_t D = size_t(cfg_.dims);
  const float w = std::clamp(cfg_.id_weight, 0.0f, 1.0f);
  std::vector<float> ids(D, 0.0f);
  if (w < 1.0f) rows_key(b, i0, n, out, pool);
  else std::fill(out, out + D, 0.0f);
  if (w > 0.0f) ids_key(b, i0, n, ids.data());
  const float a = std::sqrt(1.0f - w), c = std::sqrt(w);
  for (size_t i = 0; i < D; ++i) out[i] = a * out[i] + c * ids[i];
  make_unit(out, D);
}

void Association::episode_key(const KvBlock& b, size_t i0, size_t n, float* out,
                              ThreadPool* pool) const {
  const size_t S = size_t(cfg_.sub_spans);
  INFER_CHECK(n >= S, "association: fewer tokens than sub-spans");
  for (size_t s = 0; s < S; ++s) {
    // Part s: tokens [i0 + n*s/S, i0 + n*(s+1)/S), at least one token.
    const size_t a = i0 + n * s / S, e = i0 + n * (s + 1) / S;
    span_key(b, a, e - a, out + s * size_t(cfg_.dims), pool);
  }
}

size_t Association::query_key(const KvBlock& b, size_t i0, size_t n, float* out,
                              ThreadPool* pool) const {
  const size_t D = size_t(cfg_.dims), L = size_t(cfg_.query_part_tokens);
  const size_t parts = std::min(size_t(cfg_.query_parts), std::max<size_t>(1, (n + L - 1) / L));
  std::fill(out, out + query_floats(), 0.0f);
  for (size_t p = 0; p < parts; ++p) {
    const size_t a = i0 + n * p / parts, e = i0 + n * (p + 1) / parts;
    span_key(b, a, e - a, out + p * D, pool);
  }
  return parts;
}

float Association::association(const float* query, const float* key, size_t parts) const {
  // An unused (zero) part's cosine is 0, the least the answer can be: skipping it changes nothing.
  const size_t used = std::min(size_t(cfg_.query_parts), parts);
  return best_dot(query, key, used, size_t(cfg_.sub_spans), size_t(cfg_.dims));
}

double ScoreRule::strength_now(float strength, int64_t last_use_ms, int64_t now_ms) const {
  const double age = double(std::max<int64_t>(0, now_ms - last_use_ms));
  return double(strength) * std::exp2(-age / half_life_ms);
}

double ScoreRule::strength_term(float strength, int64_t last_use_ms, int64_t now_ms) const {
  return strength_weight *
         std::log(std::max(strength_now(strength, last_use_ms, now_ms), kMinStrength));
}

double ScoreRule::score(float association, float strength, int64_t last_use_ms,
                        int64_t now_ms) const {
  return double(association) + strength_term(strength, last_use_ms, now_ms);
}

float ScoreRule::after_recall(float strength, int64_t last_use_ms, int64_t now_ms) const {
  return float(strength_now(strength, last_use_ms, now_ms) + recall_boost);
}

}  // namespace infer::memory
