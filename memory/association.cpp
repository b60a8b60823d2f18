// Association keys from pre-RoPE K rows, and the dual score (association.h).
#include "memory/association.h"

#include "memory/splitmix.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
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

// Two 4-lane partial sums (GCC/Clang vector extensions: plain SSE on the x86-64 baseline, NEON
// on Arm), then the lanes in a fixed order: the same bits on every machine.
float dot_base(const float* a, const float* b, size_t n) {
  typedef float f4 __attribute__((vector_size(16)));
  f4 s0 = {0, 0, 0, 0}, s1 = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    f4 a0, a1, b0, b1;
    std::memcpy(&a0, a + i, 16);
    std::memcpy(&a1, a + i + 4, 16);
    std::memcpy(&b0, b + i, 16);
    std::memcpy(&b1, b + i + 4, 16);
    s0 += a0 * b0;
    s1 += a1 * b1;
  }
  const f4 s = s0 + s1;
  float t = (s[0] + s[1]) + (s[2] + s[3]);
  for (; i < n; ++i) t += a[i] * b[i];
  return t;
}

#if defined(__x86_64__)
// dot_base's arithmetic exactly (the low and high halves of one 8-lane sum are its two 4-lane
// sums; multiply and add stay separate, no FMA), in half the instructions: a turn's recall
// scores every stored key.
__attribute__((target("avx"))) float dot_avx(const float* a, const float* b, size_t n) {
  typedef float f8 __attribute__((vector_size(32)));
  typedef float f4 __attribute__((vector_size(16)));
  f8 s8 = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    f8 a8, b8;
    std::memcpy(&a8, a + i, 32);
    std::memcpy(&b8, b + i, 32);
    s8 += a8 * b8;
  }
  const f4 s = f4{s8[0], s8[1], s8[2], s8[3]} + f4{s8[4], s8[5], s8[6], s8[7]};
  float t = (s[0] + s[1]) + (s[2] + s[3]);
  for (; i < n; ++i) t += a[i] * b[i];
  return t;
}
#endif

#if defined(__x86_64__)
// The largest of the dots of `parts` query parts with `subs` key parts, each D long, every dot
// with dot_avx's exact arithmetic but four of them at once (one query load for four key parts):
// four independent sums instead of one chain that waits on each add. Scoring runs this for
// every stored key.
__attribute__((target("avx"))) float best_dot_avx(const float* query, const float* key,
                                                  size_t parts, size_t subs, size_t D) {
  typedef float f8 __attribute__((vector_size(32)));
  typedef float f4 __attribute__((vector_size(16)));
  float best = 0.0f;
  for (size_t p = 0; p < parts; ++p) {
    const float* q = query + p * D;
    for (size_t s0 = 0; s0 < subs; s0 += 4) {
      const size_t ns = std::min<size_t>(4, subs - s0);
      f8 acc[4] = {};
      size_t i = 0;
      for (; i + 8 <= D; i += 8) {
        f8 qv;
        std::memcpy(&qv, q + i, 32);
        for (size_t j = 0; j < ns; ++j) {
          f8 kv;
          std::memcpy(&kv, key + (s0 + j) * D + i, 32);
          acc[j] += qv * kv;
        }
      }
      for (size_t j = 0; j < ns; ++j) {
        const f4 h = f4{acc[j][0], acc[j][1], acc[j][2], acc[j][3]} +
                     f4{acc[j][4], acc[j][5], acc[j][6], acc[j][7]};
        float t = (h[0] + h[1]) + (h[2] + h[3]);
        for (size_t r = i; r < D; ++r) t += q[r] * key[(s0 + j) * D + r];
        best = std::max(best, t);
      }
    }
  }
  return best;
}
// __builtin_cpu_init first: these run as static initializers, maybe before libgcc's own.
bool have_avx() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx");
}
const bool kHaveAvx = have_avx();
#endif

using DotFn = float (*)(const float*, const float*, size_t);
DotFn pick_dot() {
#if defined(__x86_64__)
  if (have_avx()) return dot_avx;
#endif
  return dot_base;
}
const DotFn dot = pick_dot();

// out[r] = Σ_c m[r, c] x[c], from mt = m transposed [cols, rows]: column by column, so the inner
// loop runs over contiguous rows and vectorizes without reassociating any sum.
void matvec_t_base(const float* mt, size_t rows, size_t cols, const float* x, float* out) {
  std::fill(out, out + rows, 0.0f);
  for (size_t c = 0; c < cols; ++c) {
    const float xc = x[c];
    if (xc == 0.0f) continue;
    const float* col = mt + c * rows;
    for (size_t r = 0; r < rows; ++r) out[r] += col[r] * xc;
  }
}

#if defined(__x86_64__)
// The same sums element by element (no FMA), 8 lanes at a time: a query's key runs this for
// each of its tokens (the lift is 2048 x 128).
__attribute__((target("avx"))) void matvec_t_avx(const float* mt, size_t rows, size_t cols,
                                                 const float* x, float* out) {
  std::fill(out, out + rows, 0.0f);
  for (size_t c = 0; c < cols; ++c) {
    const float xc = x[c];
    if (xc == 0.0f) continue;
    const float* col = mt + c * rows;
    for (size_t r = 0; r < rows; ++r) out[r] += col[r] * xc;
  }
}
#endif

using MatvecFn = void (*)(const float*, size_t, size_t, const float*, float*);
MatvecFn pick_matvec_t() {
#if defined(__x86_64__)
  if (have_avx()) return matvec_t_avx;
#endif
  return matvec_t_base;
}
const MatvecFn matvec_t = pick_matvec_t();

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

// Steps 1-3: reduced [reduce_dims], unit. x is scratch [in].
void Association::token_feature(const KvBlock& b, size_t t, float* reduced,
                                std::vector<float>& x) const {
  const size_t in = in_floats();
  x.resize(in);
  size_t o = 0;
  for (int l = 0; l < n_layers_; ++l) {
    const size_t rf = size_t(row_floats_[l]), d = size_t(head_dim_[l]);
    INFER_CHECK(b.k[size_t(l)].size() >= (t + 1) * rf, "association: block rows");
    const float* k = b.k[size_t(l)].data() + t * rf;
    for (size_t h = 0; h < rf; h += d) {
      std::copy(k + h, k + h + d, x.data() + o + h);
      make_unit(x.data() + o + h, d);
    }
    o += rf;
  }
  if (!mean_.empty()) {
    for (size_t i = 0; i < in; ++i) x[i] -= mean_[i];
  }
  make_unit(x.data(), in);
  matvec_t(p1_.data(), size_t(cfg_.reduce_dims), in, x.data(), reduced);
  make_unit(reduced, size_t(cfg_.reduce_dims));
}

// Step 4: the lift_active largest units of L · reduced (ascending indices not needed).
void Association::active_units(const float* reduced, std::vector<float>& lifted,
                               std::vector<int>& active) const {
  const size_t m = size_t(cfg_.lift_dims);
  lifted.resize(m);
  matvec_t(lift_.data(), m, size_t(cfg_.reduce_dims), reduced, lifted.data());
  active.resize(m);
  std::iota(active.begin(), active.end(), 0);
  std::nth_element(active.begin(), active.begin() + cfg_.lift_active, active.end(),
                   [&](int a, int b) { return lifted[size_t(a)] > lifted[size_t(b)]; });
  active.resize(size_t(cfg_.lift_active));
}

void Association::fit(const KvBlock& b) {
  INFER_CHECK(b.size() > 0 && b.k.size() >= size_t(n_layers_), "association: fit on no rows");
  const size_t in = in_floats(), n = b.size();
  mean_.clear();
  std::vector<double> sum(in, 0.0);
  std::vector<float> x, red(size_t(cfg_.reduce_dims));
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
  std::vector<float> lifted;
  std::vector<int> active;
  for (size_t t = 0; t < n; ++t) {
    token_feature(b, t, red.data(), x);
    if (lift) {
      active_units(red.data(), lifted, active);
      for (int u : active) f[size_t(u)] += 1.0;
    } else {
      for (size_t i = 0; i < units; ++i) f[i] += red[i];
    }
  }
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

void Association::rows_key(const KvBlock& b, size_t i0, size_t n, float* out) const {
  const bool lift = cfg_.lift_active > 0;
  const size_t units = freq_.size();
  std::vector<float> acc(units), red(size_t(cfg_.reduce_dims)), x, lifted;
  std::vector<int> active;
  for (size_t i = 0; i < units; ++i) acc[i] = -float(n) * freq_[i];
  for (size_t t = i0; t < i0 + n; ++t) {
    token_feature(b, t, red.data(), x);
    if (lift) {
      active_units(red.data(), lifted, active);
      for (int u : active) acc[size_t(u)] += 1.0f;
    } else {
      for (size_t i = 0; i < units; ++i) acc[i] += red[i];
    }
  }
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

void Association::span_key(const KvBlock& b, size_t i0, size_t n, float* out) const {
  INFER_CHECK(fitted(), "association: keys before fit()");
  INFER_CHECK(n > 0 && i0 + n <= b.size() && b.ids.size() == b.size(),
              "association: span out of the block");
  const size_t D = size_t(cfg_.dims);
  const float w = std::clamp(cfg_.id_weight, 0.0f, 1.0f);
  std::vector<float> ids(D, 0.0f);
  if (w < 1.0f) rows_key(b, i0, n, out);
  else std::fill(out, out + D, 0.0f);
  if (w > 0.0f) ids_key(b, i0, n, ids.data());
  const float a = std::sqrt(1.0f - w), c = std::sqrt(w);
  for (size_t i = 0; i < D; ++i) out[i] = a * out[i] + c * ids[i];
  make_unit(out, D);
}

void Association::episode_key(const KvBlock& b, size_t i0, size_t n, float* out) const {
  const size_t S = size_t(cfg_.sub_spans);
  INFER_CHECK(n >= S, "association: fewer tokens than sub-spans");
  for (size_t s = 0; s < S; ++s) {
    // Part s: tokens [i0 + n*s/S, i0 + n*(s+1)/S), at least one token.
    const size_t a = i0 + n * s / S, e = i0 + n * (s + 1) / S;
    span_key(b, a, e - a, out + s * size_t(cfg_.dims));
  }
}

size_t Association::query_key(const KvBlock& b, size_t i0, size_t n, float* out) const {
  const size_t D = size_t(cfg_.dims), L = size_t(cfg_.query_part_tokens);
  const size_t parts = std::min(size_t(cfg_.query_parts), std::max<size_t>(1, (n + L - 1) / L));
  std::fill(out, out + query_floats(), 0.0f);
  for (size_t p = 0; p < parts; ++p) {
    const size_t a = i0 + n * p / parts, e = i0 + n * (p + 1) / parts;
    span_key(b, a, e - a, out + p * D);
  }
  return parts;
}

float Association::association(const float* query, const float* key, size_t parts) const {
  const size_t D = size_t(cfg_.dims);
  float best = 0.0f;  // an unused (zero) part's cosine: skipping it changes nothing
  const size_t used = std::min(size_t(cfg_.query_parts), parts);
#if defined(__x86_64__)
  if (kHaveAvx) return best_dot_avx(query, key, used, size_t(cfg_.sub_spans), D);
#endif
  for (size_t p = 0; p < used; ++p)
    for (int s = 0; s < cfg_.sub_spans; ++s)
      best = std::max(best, dot(query + size_t(p) * D, key + size_t(s) * D, D));
  return best;
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
