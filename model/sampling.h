// Next-token sampling: greedy argmax, or softmax with temperature, top-k and top-p (nucleus) as
// Hugging Face applies them, from a seeded RNG. Also the per-step signals the gate reads.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace infer {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy (argmax, lowest index on ties)
  int top_k = 0;             // 0: no top-k
  float top_p = 1.0f;        // 1: no nucleus cut; always keeps at least one token
  uint64_t seed = 0;
};

// What one step's distribution looked like (DESIGN.md §3, the gate's entropy signal). Measured on
// softmax(logits / T) over the whole vocabulary, before top-k/top-p; T = 1 when greedy.
struct StepSignals {
  float entropy = 0.0f;   // nats
  float top_prob = 0.0f;  // probability of the most likely token
};

// Picks one token per call from logits [V]. Owns its scratch buffers, sized once for V at
// construction: sample() allocates nothing.
class Sampler {
 public:
  Sampler(int64_t vocab_size, const SamplingParams& params);

  // logits: [V] f32. Returns the chosen id and records signals().
  int32_t sample(std::span<const float> logits);
  const StepSignals& signals() const { return signals_; }
  const SamplingParams& params() const { return params_; }
  int64_t vocab_size() const { return V_; }

  // Restarts the random stream from `seed` (same draws as a fresh Sampler with it).
  void reseed(uint64_t seed);

 private:
  // Fills probs_ with exp((l - max) / T), returns their sum and sets signals_.
  double softmax(std::span<const float> logits, float temperature);
  // Moves the `to` most probable of order_[from, n) to order_[from, to), sorted by probability
  // descending, index ascending on ties.
  void sort_range(int64_t from, int64_t to, int64_t n);
  // Uniform in [0, 1) with 53 random bits.
  double uniform();

  int64_t V_;
  SamplingParams params_;
  std::mt19937_64 rng_;
  StepSignals signals_;
  std::vector<float> probs_;    // [V] unnormalised probabilities
  std::vector<int32_t> order_;  // [V] candidate ids
};

// argmax over logits [V], lowest index on ties; NaNs never win.
int32_t argmax(std::span<const float> logits);

}  // namespace infer
