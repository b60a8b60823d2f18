// Sampler signals (entropy, top probability, max logit) against a double-precision reference,
// the fused softmax on awkward logits, and a sampler that allocates nothing after construction.
#include "model/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "test/model/sampling_logits.h"

namespace infer {
namespace test {
// Counts operator new calls made while f runs (the counting allocator of decode_alloc_test.cpp).
int64_t allocations_while(void (*f)(void*), void* ctx);
}  // namespace test
namespace {

using test::ramp_logits;

// The signals' plain double-precision reference: softmax(logits / T) over the finite logits.
struct RefSignals {
  double entropy = 0.0, top_prob = 1.0, z = 0.0, max = 0.0;
  std::vector<double> p;  // unnormalised, exp((l - max) / T)
};
RefSignals reference_signals(const std::vector<float>& l, double T) {
  RefSignals r;
  r.max = -INFINITY;
  for (float v : l) {
    if (v == v) r.max = std::max(r.max, double(v));
  }
  r.p.assign(l.size(), 0.0);
  if (!std::isfinite(r.max)) return r;
  double w = 0.0;
  for (size_t i = 0; i < l.size(); ++i) {
    if (l[i] != l[i] || l[i] == -INFINITY) continue;
    const double s = (double(l[i]) - r.max) / T;
    r.p[i] = std::exp(s);
    r.z += r.p[i];
    w += r.p[i] * s;
  }
  r.entropy = std::log(r.z) - w / r.z;
  r.top_prob = 1.0 / r.z;
  return r;
}

// Logits with the awkward values mixed in: -inf, NaN, huge of both signs, exact ties of the max.
std::vector<float> awkward_logits(int64_t V, uint64_t seed, float scale) {
  std::vector<float> l = ramp_logits(V, seed);
  uint64_t s = seed * 977 + 5;
  for (size_t i = 0; i < l.size(); ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    const int kind = int((s >> 33) % 64);
    l[i] *= scale;
    if (kind == 0) l[i] = -INFINITY;
    if (kind == 1) l[i] = NAN;
    if (kind == 2) l[i] = -3e38f;
    if (kind == 3 && seed % 2 == 0) l[i] = 1e30f;  // some runs have a huge winner (ties too)
  }
  return l;
}

TEST(FusedSoftmax, MatchesADoublePrecisionReference) {
  for (int64_t V : {1, 2, 15, 16, 17, 255, 256, 257, 1000, 4097, 262144}) {
    for (uint64_t seed : {1, 2, 3}) {
      for (float T : {1.0f, 0.01f, 0.37f, 2.7f}) {
        for (float scale : {1.0f, 30.0f}) {
          const std::vector<float> l = awkward_logits(V, seed, scale);
          const RefSignals ref = reference_signals(l, T);
          std::vector<float> probs(size_t(V), -1.0f), blocks(size_t(signals_blocks(V)));
          StepSignals sig;
          int32_t best = -1;
          const double z = fused_softmax(l, T, probs.data(), blocks.data(), &sig, &best);
          const std::string where = "V " + std::to_string(V) + " seed " + std::to_string(seed) +
                                    " T " + std::to_string(T) + " scale " + std::to_string(scale);
          ASSERT_EQ(best, argmax(l)) << where;
          if (!std::isfinite(ref.max)) {
            EXPECT_EQ(z, 0.0) << where;
            continue;
          }
          EXPECT_EQ(double(sig.max_logit), ref.max) << where;
          EXPECT_NEAR(z, ref.z, 1e-5 * ref.z) << where;
          EXPECT_NEAR(sig.top_prob, ref.top_prob, 1e-5 * ref.top_prob) << where;
          EXPECT_NEAR(sig.entropy, ref.entropy, 1e-4 + 1e-5 * ref.entropy) << where;
          for (size_t i = 0; i < l.size(); ++i) {
            // ~1 ulp exp of a float argument whose rounding is |s| ulp: relative 1e-6 * (1 + |s|)
            const double tol = 2e-6 * ref.p[i] * (1.0 + std::abs(std::log(std::max(ref.p[i], 1e-300))));
            ASSERT_NEAR(probs[i], ref.p[i], ref.p[i] < 1e-37 ? 1e-37 : tol) << where << " i " << i;
          }
        }
      }
    }
  }
}

TEST(FusedSoftmax, NoDistributionWithoutAFiniteMax) {
  for (const std::vector<float>& l :
       {std::vector<float>{-INFINITY, NAN, -INFINITY}, std::vector<float>{NAN, NAN},
        std::vector<float>{1.0f, INFINITY, 2.0f, INFINITY}}) {
    std::vector<float> probs(l.size()), blocks(size_t(signals_blocks(int64_t(l.size()))));
    StepSignals sig;
    int32_t best = -1;
    EXPECT_EQ(fused_softmax(l, 1.0f, probs.data(), blocks.data(), &sig, &best), 0.0);
    EXPECT_EQ(best, argmax(l));
    EXPECT_EQ(sig.top_prob, 1.0f);
    EXPECT_EQ(sig.entropy, 0.0f);
  }
}

TEST(Sampler, SignalsFollowTheTemperatureAndGiveTheMaxLogit) {
  const std::vector<float> l = awkward_logits(5000, 7, 3.0f);
  for (float T : {0.0f, 0.5f, 1.9f}) {
    Sampler s(int64_t(l.size()), SamplingParams{T, 0, 1.0f, 3});
    const int32_t id = s.sample(l);
    const RefSignals ref = reference_signals(l, T > 0 ? T : 1.0);
    EXPECT_NEAR(s.signals().entropy, ref.entropy, 1e-4 + 1e-5 * ref.entropy) << T;
    EXPECT_NEAR(s.signals().top_prob, ref.top_prob, 1e-5 * ref.top_prob) << T;
    EXPECT_EQ(double(s.signals().max_logit), ref.max) << T;
    if (T == 0.0f) {
      EXPECT_EQ(id, argmax(l));
    }
    EXPECT_GT(ref.p[size_t(id)], 0.0) << T;  // never a -inf/NaN token
  }
}

TEST(Sampler, AllocatesNothingAfterConstruction) {
  constexpr int64_t V = 262144;  // Gemma's vocabulary
  const auto l = ramp_logits(V, 31);
  for (const SamplingParams p :
       {SamplingParams{0.0f, 0, 1.0f, 1}, SamplingParams{1.0f, 0, 1.0f, 1},
        SamplingParams{0.9f, 64, 0.95f, 1}, SamplingParams{1.0f, 0, 0.5f, 1},
        SamplingParams{1.0f, 0, 1.0f, 1, 0.05f, 1.1f, 64},
        SamplingParams{0.0f, 0, 1.0f, 1, 0.0f, 1.3f, 256},
        SamplingParams{0.8f, 40, 0.9f, 1, 0.1f, 1.2f, 16}}) {
    struct Ctx {
      Sampler sampler;
      const std::vector<float>* logits;
      int64_t sum = 0;
    } ctx{Sampler(V, p), &l};
    const int64_t n = test::allocations_while(
        [](void* c) {
          auto& x = *static_cast<Ctx*>(c);
          for (int i = 0; i < 20; ++i) {
            const int32_t id = x.sampler.sample(*x.logits);
            x.sampler.observe(id);  // the steady state: the penalty's window wraps
            x.sum += id;
          }
        },
        &ctx);
    EXPECT_EQ(n, 0) << "temperature " << p.temperature << " top-k " << p.top_k << " top-p "
                    << p.top_p;
  }
}

}  // namespace
}  // namespace infer
