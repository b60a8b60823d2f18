// Next-token sampling: greedy argmax, or softmax with temperature, top-k, top-p (nucleus) and
// min-p as Hugging Face applies them, from a seeded RNG; llama.cpp's repeat penalty over the last
// N ids of the context first. Also the per-step signals the gate reads.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "model/recent_ids.h"

namespace infer {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy (argmax, lowest index on ties)
  int top_k = 0;             // 0: no top-k
  float top_p = 1.0f;        // 1: no nucleus cut; always keeps at least one token
  uint64_t seed = 0;
  // Drop tokens whose probability is below min_p times the most likely one's (after temperature,
  // top-k and top-p, as HF's MinPLogitsWarper); 0: off.
  float min_p = 0.0f;
  // llama.cpp's repeat penalty: the logit of every id among the last repeat_last_n ids of the
  // context (prompt and generated, each id once) is divided by repeat_penalty when positive and
  // multiplied by it otherwise, before anything else, greedy included. 1 or last_n 0: off.
  float repeat_penalty = 1.0f;
  int repeat_last_n = 64;
};

// What one step's distribution looked like (DESIGN.md §3, the gate's entropy signal). Measured on
// softmax(logits / T) over the whole vocabulary, before top-k/top-p; T = 1 when greedy.
struct StepSignals {
  float entropy = 0.0f;   // nats
  float top_prob = 0.0f;  // probability of the most likely token
  // The largest logit (NaN never counts; -inf when there is none): p_i = exp((l_i - max_logit)
  // / T) * top_prob, so a caller gets any token's probability without another pass over [V].
  float max_logit = 0.0f;
};

// Picks one token per call from logits [V]. Owns its scratch buffers, sized once for V at
// construction: sample() and observe() allocate nothing.
class Sampler {
 public:
  Sampler(int64_t vocab_size, const SamplingParams& params);

  // logits: [V] f32. Returns the chosen id and records signals() (of the penalised logits).
  int32_t sample(std::span<const float> logits);
  // The context's ids as they join it (prompt and generated): the repeat penalty's window keeps
  // the last repeat_last_n. Nothing is kept while the penalty is off.
  void observe(int32_t id) { recent_.push(id); }
  void observe(std::span<const int32_t> ids) { recent_.push(ids); }
  void forget_context() { recent_.clear(); }
  // The penalty is on: sample() may pick another id than the raw logits' argmax.
  bool penalises() const { return recent_.capacity() > 0; }
  // What the last sample() drew from: `logits` itself, or its penalised copy.
  std::span<const float> sampled_logits(std::span<const float> logits) const {
    return penalised_last_ ? std::span<const float>(penalised_) : logits;
  }
  const StepSignals& signals() const { return signals_; }
  const SamplingParams& params() const { return params_; }
  int64_t vocab_size() const { return V_; }

  // Restarts the random stream from `seed` (same draws as a fresh Sampler with it).
  void reseed(uint64_t seed);

 private:
  // Fills probs_ with exp((l - max) / T), returns their sum and sets signals_. One vectorised
  // pass for the max (and the argmax, returned in *best) and one for exp and the sums: the gate
  // reads the signals every step, over the whole vocabulary (262,144 ids for Gemma 4).
  double softmax(std::span<const float> logits, float temperature, int32_t* best);
  // Moves the `to` most probable of order_[from, n) to order_[from, to), sorted by probability
  // descending, index ascending on ties.
  void sort_range(int64_t from, int64_t to, int64_t n);
  // Uniform in [0, 1) with 53 random bits.
  double uniform();
  // Copies logits to penalised_ and applies the repeat penalty to each recent id once.
  std::span<const float> penalise(std::span<const float> logits);
  // A draw from the candidates order_[0, n) (sorted, most probable first) of total `mass`, after
  // min-p has cut their tail.
  int32_t draw_sorted(int64_t n, double mass, float min_prob);
  // A draw from the whole vocabulary, tokens below min_prob excluded (0: none).
  int32_t draw_all(double z, float min_prob);

  int64_t V_;
  SamplingParams params_;
  std::mt19937_64 rng_;
  StepSignals signals_;
  std::vector<float> probs_;    // [V] unnormalised probabilities
  std::vector<int32_t> order_;  // [V] candidate ids
  std::vector<float> block_max_;  // [ceil(V / kMaxBlock)] max of each block of logits
  // The repeat penalty's state (empty while it is off).
  RecentIds recent_;
  std::vector<float> penalised_;  // [V] the logits with the penalty applied
  std::vector<uint8_t> seen_;     // [V] ids already penalised this step (cleared after)
  bool penalised_last_ = false;
};

// The signals' fast pass (what Sampler uses), exposed for tests: writes exp((l - max) / T) to
// probs [V] and returns their sum (0 when no logit is finite or one is +inf: no distribution);
// sets *signals and *best (argmax(logits)). block_max: scratch of signals_blocks(V) floats.
int64_t signals_blocks(int64_t V);
double fused_softmax(std::span<const float> logits, float temperature, float* probs,
                     float* block_max, StepSignals* signals, int32_t* best);

// argmax over logits [V], lowest index on ties; NaNs never win.
int32_t argmax(std::span<const float> logits);

}  // namespace infer
