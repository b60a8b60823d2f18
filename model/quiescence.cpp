// Quiescence policy (quiescence.h): probe velocities, their short and long EMAs, the skip rule.
#include "model/quiescence.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"

namespace infer {

float stream_velocity(const float* a, const float* b, int64_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < n; ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  if (aa == 0 || bb == 0) return 1.0f;
  return float(std::clamp(1.0 - ab / std::sqrt(aa * bb), 0.0, 2.0));
}

Quiescence::Quiescence(const QuiescenceConfig& cfg, int n_layers, int64_t hidden,
                       int64_t max_chunk)
    : cfg_(cfg),
      h_(hidden),
      snap_(size_t(n_layers) * size_t(hidden)),
      token_v_(size_t(std::max<int64_t>(max_chunk, 1))) {
  INFER_CHECK(n_layers > 0 && hidden > 0, "quiescence: %d layers, hidden %lld", n_layers,
              (long long)hidden);
  for (int p : {n_layers / 4, 3 * n_layers / 8, n_layers / 2 - 1}) {
    p = std::max(p, 0);
    if (probes_.empty() || p > probes_.back()) probes_.push_back(p);
  }
  prev_.assign(probes_.size() * size_t(hidden), 0.0f);
  short_.alpha = cfg.short_alpha;
  long_.alpha = cfg.long_alpha;
}

bool Quiescence::is_probe(int layer) const {
  return std::find(probes_.begin(), probes_.end(), layer) != probes_.end();
}

void Quiescence::observe(int layer, const float* x, int64_t T) {
  const size_t k = size_t(std::find(probes_.begin(), probes_.end(), layer) - probes_.begin());
  INFER_CHECK(k < probes_.size() && T >= 1 && size_t(T) <= token_v_.size(),
              "quiescence: layer %d, T %lld", layer, (long long)T);
  float* prev = prev_.data() + k * size_t(h_);
  for (int64_t t = 0; t < T; ++t) {
    const float* row = x + t * h_;
    const float* before = t == 0 ? prev : row - h_;
    const float v = t == 0 && !has_prev_ ? 0.0f : stream_velocity(row, before, h_);
    token_v_[size_t(t)] = k == 0 ? v : std::max(token_v_[size_t(t)], v);
  }
  std::memcpy(prev, x + (T - 1) * h_, size_t(h_) * sizeof(float));
}

bool Quiescence::decide(int64_t T, bool may_skip) {
  const bool had_prev = has_prev_;
  has_prev_ = true;
  for (int64_t t = had_prev ? 0 : 1; t < T; ++t) {  // the stream's first token has no velocity
    short_.add(token_v_[size_t(t)]);
    long_.add(token_v_[size_t(t)]);
  }
  // Both horizons must be quiet (see QuiescenceConfig); strict < so threshold 0 never skips.
  const bool skip = may_skip && T == 1 && had_prev && has_full_ && run_ < cfg_.max_run &&
                    short_.value() < cfg_.threshold && long_.value() < cfg_.threshold;
  run_ = skip ? run_ + 1 : 0;
  stats_.velocity_short = short_.value();
  stats_.velocity_long = long_.value();
  return skip;
}

void Quiescence::reset() {
  has_prev_ = has_full_ = false;
  short_.reset();
  long_.reset();
  run_ = 0;
  stats_.last_skipped = false;
}

}  // namespace infer
