// Sampler: softmax with temperature, then top-k, then top-p, as Hugging Face's logits warpers
// (TemperatureLogitsWarper → TopKLogitsWarper → TopPLogitsWarper), then one seeded draw.
#include "model/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "base/check.h"

namespace infer {

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  float best_value = -std::numeric_limits<float>::infinity();
  bool found = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    // Strictly greater: the lowest index wins ties; NaN compares false and never wins.
    if (v > best_value || (!found && v == best_value)) {
      best_value = v;
      best = int32_t(i);
      found = true;
    }
  }
  return best;
}

Sampler::Sampler(int64_t vocab_size, const SamplingParams& params)
    : V_(vocab_size),
      params_(params),
      rng_(params.seed),
      probs_(size_t(vocab_size)),
      order_(size_t(vocab_size)) {
  INFER_CHECK(vocab_size > 0, "vocab_size %lld", static_cast<long long>(vocab_size));
}

void Sampler::reseed(uint64_t seed) { rng_.seed(seed); }

double Sampler::uniform() { return double(rng_() >> 11) * 0x1.0p-53; }

double Sampler::softmax(std::span<const float> logits, float temperature) {
  float max_logit = -std::numeric_limits<float>::infinity();
  for (float v : logits) max_logit = std::max(max_logit, v);  // NaN never raises the max
  const float inv_t = 1.0f / temperature;
  double z = 0.0;
  double weighted = 0.0;  // Σ p_i s_i with s_i = (l_i - max) / T, for the entropy
  for (int64_t i = 0; i < V_; ++i) {
    const float l = logits[size_t(i)];
    float p = 0.0f;
    if (l == l && l != -std::numeric_limits<float>::infinity()) {  // NaN and -inf: probability 0
      const float s = (l - max_logit) * inv_t;
      p = std::exp(s);
      weighted += double(p) * double(s);
    }
    probs_[size_t(i)] = p;
    z += p;
  }
  if (!(z > 0.0) || !std::isfinite(z)) {  // all -inf/NaN, or +inf logits: no distribution
    signals_ = StepSignals{0.0f, 1.0f};
    return 0.0;
  }
  // H = -Σ q log q with q = p / Z and log q = s - log Z, so H = log Z - Σ q s.
  signals_.entropy = float(std::log(z) - weighted / z);
  signals_.top_prob = float(1.0 / z);
  return z;
}

void Sampler::sort_range(int64_t from, int64_t to, int64_t n) {
  const float* p = probs_.data();
  auto more_likely = [p](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); };
  int32_t* o = order_.data();
  if (to < n) std::nth_element(o + from, o + to, o + n, more_likely);
  std::sort(o + from, o + to, more_likely);
}

int32_t Sampler::sample(std::span<const float> logits) {
  INFER_CHECK(int64_t(logits.size()) == V_, "logits [%zu], sampler V %lld", logits.size(),
              static_cast<long long>(V_));
  if (params_.temperature <= 0.0f) {
    softmax(logits, 1.0f);  // only for signals()
    return argmax(logits);
  }
  const double z = softmax(logits, params_.temperature);
  if (!(z > 0.0)) return argmax(logits);

  const bool use_top_k = params_.top_k > 0 && params_.top_k < V_;
  const bool use_top_p = params_.top_p < 1.0f;
  if (!use_top_k && !use_top_p) {  // plain multinomial over the whole vocabulary
    const double target = uniform() * z;
    double cum = 0.0;
    int32_t last_nonzero = 0;
    for (int64_t i = 0; i < V_; ++i) {
      const float p = probs_[size_t(i)];
      if (p == 0.0f) continue;
      cum += p;
      last_nonzero = int32_t(i);
      if (cum > target) return int32_t(i);
    }
    return last_nonzero;  // rounding left target just above the sum
  }

  std::iota(order_.begin(), order_.end(), 0);
  int64_t n = V_;  // candidates are order_[0, n)
  if (use_top_k) {
    n = params_.top_k;
    sort_range(0, n, V_);  // exactly k: ties at the boundary go to the lower index
  }
  double mass = 0.0;
  for (int64_t i = 0; i < n; ++i) mass += probs_[size_t(order_[size_t(i)])];

  if (use_top_p) {
    // Keep the smallest most-probable prefix whose probability reaches top_p of the candidates'
    // mass (HF removes a token when the mass strictly above it is already >= top_p), at least one.
    // The prefix is sorted in growing chunks, so a peaked distribution sorts only a few entries.
    const double threshold = double(params_.top_p) * mass;
    double cum = 0.0;
    int64_t sorted = 0;
    int64_t kept = 0;
    for (int64_t chunk = 64; kept == 0; chunk *= 2) {
      const int64_t to = std::min(n, sorted + chunk);
      if (!use_top_k) sort_range(sorted, to, n);  // top-k already sorted all of [0, n)
      for (int64_t i = sorted; i < to; ++i) {
        cum += probs_[size_t(order_[size_t(i)])];
        if (cum >= threshold) {
          kept = i + 1;
          break;
        }
      }
      sorted = to;
      if (kept == 0 && sorted == n) kept = n;  // rounding: the whole set
    }
    n = kept;
    mass = cum;
  }

  const double target = uniform() * mass;
  double cum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    cum += probs_[size_t(order_[size_t(i)])];
    if (cum > target) return order_[size_t(i)];
  }
  return order_[size_t(n - 1)];
}

}  // namespace infer
