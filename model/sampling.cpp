// Sampler: llama.cpp's repeat penalty, then softmax with temperature, top-k, top-p and min-p, as
// Hugging Face's logits warpers (Temperature → TopK → TopP → MinP), then one seeded draw.
#include "model/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "base/check.h"
#include "model/ops/attention_kernels.h"

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

void Sampler::reseed(uint64_t seed) { rng_.seed(seed); }

double Sampler::uniform() { return double(rng_() >> 11) * 0x1.0p-53; }

namespace {

// Logits per block of the max pass: the argmax is found again only inside the first block whose
// max is the global one (block maxima are exact, so this is argmax()'s answer).
constexpr int64_t kMaxBlock = 256;
// Floats per chunk of the exp pass: the shifted logits stay in L1 between the passes over them.
constexpr int64_t kExpChunk = 1024;
// Lanes of the partial sums and maxima: independent accumulators the compiler turns into vector
// registers (16 floats: one AVX-512 register, four SSE ones).
constexpr int kLanes = 16;
// exp() of anything below this is 0 in float; clamping there keeps p * s finite (0, not 0 * -inf)
// for -inf and NaN logits (probability 0) and for (l - max) / T overflowing to -inf.
constexpr float kMinExponent = -200.0f;

// The vectorised exp of the attention kernels (AVX-512, else a portable polynomial), ~1 ulp.
ExpFn best_exp() {
  static const ExpFn fn = attention_kernels().front().exp;
  return fn;
}

// max over x[0, n) with NaN ignored (-inf when there is none); x > m ? x : m is exactly MAXPS.
inline __attribute__((always_inline)) float block_max(const float* x, int64_t n) {
  float lane[kLanes];
  for (float& m : lane) m = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  }
  for (; i < n; ++i) lane[0] = x[i] > lane[0] ? x[i] : lane[0];
  float m = lane[0];
  for (int j = 1; j < kLanes; ++j) m = lane[j] > m ? lane[j] : m;
  return m;
}

}  // namespace

int64_t signals_blocks(int64_t V) { return (V + kMaxBlock - 1) / kMaxBlock; }

// One clone per target, picked at load time: the lane loops become AVX-512 or SSE vectors.
__attribute__((target_clones("avx512f", "avx2", "default")))
double fused_softmax(std::span<const float> logits, float temperature, float* probs,
                     float* block_maxima, StepSignals* signals, int32_t* best) {
  const int64_t V = int64_t(logits.size());
  const float* l = logits.data();
  const int64_t blocks = signals_blocks(V);
  float max_logit = -std::numeric_limits<float>::infinity();
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t from = b * kMaxBlock;
    block_maxima[b] = block_max(l + from, std::min(kMaxBlock, V - from));
    max_logit = block_maxima[b] > max_logit ? block_maxima[b] : max_logit;
  }
  signals->max_logit = max_logit;
  // No finite max: every logit -inf/NaN, or a +inf one. No distribution (probs unused).
  if (!std::isfinite(max_logit)) {
    *best = argmax(logits);
    signals->entropy = 0.0f;
    signals->top_prob = 1.0f;
    return 0.0;
  }
  for (int64_t b = 0;; ++b) {  // the first block holding the max, and its first index there
    if (block_maxima[b] != max_logit) continue;
    int64_t i = b * kMaxBlock;
    while (!(l[i] == max_logit)) ++i;
    *best = int32_t(i);
    break;
  }

  const float inv_t = 1.0f / temperature;
  const ExpFn exp_fn = best_exp();
  double z = 0.0;
  double weighted = 0.0;  // Σ p_i s_i with s_i = (l_i - max) / T, for the entropy
  float s[kExpChunk];
  for (int64_t c = 0; c < V; c += kExpChunk) {
    const int64_t n = std::min(kExpChunk, V - c);
    // s = max((l - max) / T, kMinExponent), NaN and -inf landing on kMinExponent; in blocks of
    // kLanes so that the compiler vectorises it (at -O2 it takes no loop needing a scalar tail).
    const float* lc = l + c;
    int64_t k = 0;
    for (; k + kLanes <= n; k += kLanes) {
      for (int j = 0; j < kLanes; ++j) {
        const float si = (lc[k + j] - max_logit) * inv_t;
        s[k + j] = si > kMinExponent ? si : kMinExponent;
      }
    }
    for (; k < n; ++k) {
      const float si = (lc[k] - max_logit) * inv_t;
      s[k] = si > kMinExponent ? si : kMinExponent;
    }
    float* p = probs + c;
    exp_fn(s, p, n);
    // Float partial sums over at most kExpChunk terms each, added up in double per chunk.
    float zl[kLanes] = {}, wl[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) {
        zl[j] += p[i + j];
        wl[j] += p[i + j] * s[i + j];
      }
    }
    for (; i < n; ++i) {
      zl[0] += p[i];
      wl[0] += p[i] * s[i];
    }
    float zc = 0.0f, wc = 0.0f;
    for (int j = 0; j < kLanes; ++j) {
      zc += zl[j];
      wc += wl[j];
    }
    z += zc;
    weighted += wc;
  }
  // H = -Σ q log q with q = p / Z and log q = s - log Z, so H = log Z - Σ q s. z >= 1: the max's
  // own term is exp(0).
  signals->entropy = float(std::log(z) - weighted / z);
  signals->top_prob = float(1.0 / z);
  return z;
}

Sampler::Sampler(int64_t vocab_size, const SamplingParams& params)
    : V_(vocab_size),
      params_(params),
      rng_(params.seed),
      probs_(size_t(vocab_size)),
      order_(size_t(vocab_size)),
      block_max_(size_t(signals_blocks(vocab_size))) {
  INFER_CHECK(vocab_size > 0, "vocab_size %lld", static_cast<long long>(vocab_size));
  if (params.repeat_penalty != 1.0f && params.repeat_last_n > 0) {
    recent_ = RecentIds(params.repeat_last_n);
    penalised_.resize(size_t(vocab_size));
    seen_.resize(size_t(vocab_size));
  }
  best_exp();  // picks the kernel now: sample() allocates nothing
}

double Sampler::softmax(std::span<const float> logits, float temperature, int32_t* best) {
  return fused_softmax(logits, temperature, probs_.data(), block_max_.data(), &signals_, best);
}

void Sampler::sort_range(int64_t from, int64_t to, int64_t n) {
  const float* p = probs_.data();
  auto more_likely = [p](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); };
  int32_t* o = order_.data();
  if (to < n) std::nth_element(o + from, o + to, o + n, more_likely);
  std::sort(o + from, o + to, more_likely);
}

std::span<const float> Sampler::penalise(std::span<const float> logits) {
  std::copy(logits.begin(), logits.end(), penalised_.begin());
  const float f = params_.repeat_penalty;
  // Each id once however often it recurs (llama.cpp counts presence for the repeat penalty).
  for (int32_t id : recent_.ids()) {
    if (id < 0 || id >= V_ || seen_[size_t(id)]) continue;
    seen_[size_t(id)] = 1;
    float& l = penalised_[size_t(id)];
    l = l > 0.0f ? l / f : l * f;
  }
  for (int32_t id : recent_.ids()) {
    if (id >= 0 && id < V_) seen_[size_t(id)] = 0;
  }
  return penalised_;
}

int32_t Sampler::sample(std::span<const float> raw_logits) {
  INFER_CHECK(int64_t(raw_logits.size()) == V_, "logits [%zu], sampler V %lld", raw_logits.size(),
              static_cast<long long>(V_));
  penalised_last_ = penalises() && recent_.size() > 0;
  const std::span<const float> logits = penalised_last_ ? penalise(raw_logits) : raw_logits;
  int32_t best = 0;
  if (params_.temperature <= 0.0f) {
    softmax(logits, 1.0f, &best);  // the argmax, and signals() at T = 1
    return best;
  }
  const double z = softmax(logits, params_.temperature, &best);
  if (!(z > 0.0)) return best;
  // HF's min-p keeps p_i >= min_p * p_max; probs_ are unnormalised, so compare with the max's.
  const float min_prob = params_.min_p > 0.0f ? params_.min_p * probs_[size_t(best)] : 0.0f;

  const bool use_top_k = params_.top_k > 0 && params_.top_k < V_;
  const bool use_top_p = params_.top_p < 1.0f;
  if (!use_top_k && !use_top_p) return draw_all(z, min_prob);

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
  return draw_sorted(n, mass, min_prob);
}

int32_t Sampler::draw_sorted(int64_t n, double mass, float min_prob) {
  // The candidates are sorted, so min-p cuts a tail; the first (the max) always stays.
  if (min_prob > 0.0f) {
    const int64_t before = n;
    while (n > 1 && probs_[size_t(order_[size_t(n - 1)])] < min_prob) --n;
    if (n != before) {
      mass = 0.0;
      for (int64_t i = 0; i < n; ++i) mass += probs_[size_t(order_[size_t(i)])];
    }
  }
  const double target = uniform() * mass;
  double cum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    cum += probs_[size_t(order_[size_t(i)])];
    if (cum > target) return order_[size_t(i)];
  }
  return order_[size_t(n - 1)];
}

int32_t Sampler::draw_all(double z, float min_prob) {
  if (min_prob > 0.0f) {  // the kept tokens' mass first: one more pass, no sort
    z = 0.0;
    for (int64_t i = 0; i < V_; ++i) {
      if (probs_[size_t(i)] >= min_prob) z += probs_[size_t(i)];
    }
  }
  const double target = uniform() * z;
  double cum = 0.0;
  int32_t last_kept = 0;
  for (int64_t i = 0; i < V_; ++i) {
    const float p = probs_[size_t(i)];
    if (p == 0.0f || p < min_prob) continue;
    cum += p;
    last_kept = int32_t(i);
    if (cum > target) return int32_t(i);
  }
  return last_kept;  // rounding left target just above the sum
}

}  // namespace infer
