// Quiescence (DESIGN.md §6): decides per decode token whether the upper layers may be skipped,
// from the velocity of the residual stream at probe depths, and holds the last fully computed
// token's stream after every layer (what a skipped token carries). Buffers sized at construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace infer {

struct QuiescenceConfig {
  float threshold = 0.001f;  // skip while both smoothed velocities are below this
  // EMA weights of the newest sample: short ~2 tokens (reacts at once to a token that moves),
  // long ~16 tokens (demands a sustained quiet stretch, not one still token in busy text).
  float short_alpha = 0.5f;
  float long_alpha = 1.0f / 16;
  // At most this many skipped tokens in a row: the carried contribution is then refreshed by a
  // full token, so its staleness is bounded even in a stream that stays quiet for ever.
  int max_run = 8;
};

// 1 - cos(a, b) over n floats, clamped to [0, 2] (rounding can push cos of equal rows past 1; a
// negative velocity would let threshold 0 skip). 1 when either vector is zero.
float stream_velocity(const float* a, const float* b, int64_t n);

// Bias-corrected exponential moving average (as Adam's moments): the first sample is the mean
// itself, so a fresh stream is judged on what it has seen, not on an arbitrary start value.
struct Ema {
  float alpha = 0.5f;
  double sum = 0, weight = 0;
  void add(float v) {
    sum = (1 - alpha) * sum + alpha * v;
    weight = (1 - alpha) * weight + alpha;
  }
  float value() const { return weight > 0 ? float(sum / weight) : 1.0f; }
  void reset() { sum = weight = 0; }
};

struct QuiescenceStats {
  int64_t tokens = 0;          // decode tokens seen (T = 1 chunks)
  int64_t skipped_tokens = 0;  // of those, skipped ones
  int64_t skipped_layers = 0;  // layers not computed (layer count after the skip depth, per skip)
  bool last_skipped = false;
  float velocity_short = 1, velocity_long = 1;  // the EMAs after the latest token
};

class Quiescence {
 public:
  // Probes at layers L/4, 3L/8 and L/2 - 1 (at least layer 0); layers after the deepest probe are
  // the ones skipped. hidden: H; max_chunk: the most rows one chunk feeds.
  Quiescence(const QuiescenceConfig& cfg, int n_layers, int64_t hidden, int64_t max_chunk);

  const QuiescenceConfig& config() const { return cfg_; }
  int skip_depth() const { return probes_.back(); }  // the deepest probe; skips start after it
  bool is_probe(int layer) const;

  // The chunk's stream x [T, H] after probe `layer`: each row is compared with the row before it
  // (the first with the previous chunk's last) at that depth; a token's velocity is its largest
  // over the probes.
  void observe(int layer, const float* x, int64_t T);
  // After the deepest probe's observe(): folds the T tokens' velocities into the EMAs in order and
  // says whether the (single) token skips: only when may_skip (a decode token) and a full token
  // exists to carry from.
  bool decide(int64_t T, bool may_skip);
  // The last fully computed token's stream after `layer` [H] (layers >= skip_depth()).
  float* snapshot(int layer) { return snap_.data() + size_t(layer) * size_t(h_); }
  void mark_full() { has_full_ = true; }
  bool has_full() const { return has_full_; }

  float velocity_short() const { return short_.value(); }
  float velocity_long() const { return long_.value(); }
  const QuiescenceStats& stats() const { return stats_; }
  QuiescenceStats& stats() { return stats_; }
  void reset();  // a new stream: no history, stats kept

 private:
  QuiescenceConfig cfg_;
  int64_t h_;
  std::vector<int> probes_;      // ascending
  std::vector<float> prev_;      // [probes, H]: the previous token's rows
  std::vector<float> snap_;      // [L, H]
  bool has_prev_ = false, has_full_ = false;
  std::vector<float> token_v_;   // [max_chunk]: each row's max over the probes
  Ema short_, long_;
  int run_ = 0;                  // skipped tokens in a row
  QuiescenceStats stats_;
};

}  // namespace infer
