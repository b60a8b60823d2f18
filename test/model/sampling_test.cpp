// Sampler: greedy ties, top-k/top-p/min-p limits, the repeat penalty and its window, seeded
// reproducibility, the empirical distribution against the softmax, and the per-step signals.
#include "model/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "test/model/sampling_logits.h"

namespace infer {
namespace {

using test::ramp_logits;

TEST(Argmax, PicksTheLowestIndexOnTies) {
  const std::vector<float> l = {1.0f, 3.0f, -2.0f, 3.0f, 3.0f};
  EXPECT_EQ(argmax(l), 1);
}

TEST(Argmax, IgnoresNaN) {
  const std::vector<float> l = {NAN, 0.5f, NAN, 2.0f};
  EXPECT_EQ(argmax(l), 3);
}

TEST(Sampler, TemperatureZeroIsArgmaxWithLowestIndexOnTies) {
  Sampler s(5, SamplingParams{0.0f, 0, 1.0f, 1});
  const std::vector<float> l = {1.0f, 3.0f, -2.0f, 3.0f, 3.0f};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(s.sample(l), 1);
}

TEST(Sampler, TopKOneEqualsGreedy) {
  const auto l = ramp_logits(1000, 7);
  Sampler s(1000, SamplingParams{1.5f, 1, 1.0f, 42});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(l), argmax(l));
}

TEST(Sampler, TinyTopPEqualsGreedy) {
  const auto l = ramp_logits(1000, 8);
  Sampler s(1000, SamplingParams{2.0f, 0, 1e-6f, 43});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(l), argmax(l));
  Sampler zero(1000, SamplingParams{2.0f, 0, 0.0f, 43});
  EXPECT_EQ(zero.sample(l), argmax(l));
}

TEST(Sampler, ASeedReproducesTheSameDraws) {
  const auto l = ramp_logits(5000, 9);
  for (const SamplingParams p :
       {SamplingParams{1.0f, 0, 1.0f, 123}, SamplingParams{0.8f, 40, 1.0f, 123},
        SamplingParams{1.0f, 0, 0.9f, 123}, SamplingParams{1.0f, 64, 0.95f, 123}}) {
    Sampler a(5000, p), b(5000, p);
    std::vector<int32_t> first, second;
    for (int i = 0; i < 200; ++i) first.push_back(a.sample(l));
    for (int i = 0; i < 200; ++i) second.push_back(b.sample(l));
    EXPECT_EQ(first, second);
    a.reseed(123);
    for (int i = 0; i < 200; ++i) EXPECT_EQ(a.sample(l), first[size_t(i)]);
    Sampler other(5000, SamplingParams{p.temperature, p.top_k, p.top_p, 124});
    std::vector<int32_t> third;
    for (int i = 0; i < 200; ++i) third.push_back(other.sample(l));
    EXPECT_NE(first, third);
  }
}

// Pearson's chi-square over the categories; with k-1 degrees of freedom its mean is k-1 and its
// standard deviation sqrt(2(k-1)), so mean + 6 sd fails a correct sampler about once in 10^7 runs.
void expect_matches(const std::vector<double>& expected_p, const std::vector<int>& counts, int n) {
  double chi2 = 0.0;
  int k = 0;
  for (size_t i = 0; i < expected_p.size(); ++i) {
    const double e = expected_p[i] * n;
    if (expected_p[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0";
      continue;
    }
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
    ++k;
  }
  const double dof = k - 1;
  EXPECT_LT(chi2, dof + 6.0 * std::sqrt(2.0 * dof)) << "categories " << k;
}

TEST(Sampler, DrawsFollowTheTemperedSoftmax) {
  const std::vector<float> l = {0.0f, 1.0f, 2.0f, -1.0f, 0.5f, 1.5f, -3.0f, 0.25f};
  const float t = 0.7f;
  std::vector<double> p(l.size());
  double z = 0;
  for (size_t i = 0; i < l.size(); ++i) z += p[i] = std::exp(l[i] / t);
  for (auto& v : p) v /= z;
  Sampler s(int64_t(l.size()), SamplingParams{t, 0, 1.0f, 5});
  const int n = 200000;
  std::vector<int> counts(l.size());
  for (int i = 0; i < n; ++i) ++counts[size_t(s.sample(l))];
  expect_matches(p, counts, n);
}

TEST(Sampler, TopKAndTopPRenormaliseOverTheKeptTokens) {
  // Probabilities 0.4, 0.3, 0.15, 0.1, 0.05 (in shuffled positions).
  const std::vector<double> q = {0.1, 0.4, 0.05, 0.3, 0.15};
  std::vector<float> l;
  for (double v : q) l.push_back(float(std::log(v)));
  const int n = 100000;
  {  // top-k 3 keeps 0.4, 0.3, 0.15.
    Sampler s(5, SamplingParams{1.0f, 3, 1.0f, 11});
    std::vector<int> counts(5);
    for (int i = 0; i < n; ++i) ++counts[size_t(s.sample(l))];
    expect_matches({0, 0.4 / 0.85, 0, 0.3 / 0.85, 0.15 / 0.85}, counts, n);
  }
  {  // top-p 0.75 keeps 0.4, 0.3 and 0.15 (0.7 < 0.75 <= 0.85).
    Sampler s(5, SamplingParams{1.0f, 0, 0.75f, 12});
    std::vector<int> counts(5);
    for (int i = 0; i < n; ++i) ++counts[size_t(s.sample(l))];
    expect_matches({0, 0.4 / 0.85, 0, 0.3 / 0.85, 0.15 / 0.85}, counts, n);
  }
  {  // top-k 4 then top-p 0.5 of the renormalised 0.95: 0.4/0.95 < 0.5 <= 0.7/0.95.
    Sampler s(5, SamplingParams{1.0f, 4, 0.5f, 13});
    std::vector<int> counts(5);
    for (int i = 0; i < n; ++i) ++counts[size_t(s.sample(l))];
    expect_matches({0, 0.4 / 0.7, 0, 0.3 / 0.7, 0}, counts, n);
  }
}

SamplingParams with_min_p(SamplingParams p, float min_p) {
  p.min_p = min_p;
  return p;
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheTopOne) {
  // Probabilities 0.4, 0.3, 0.15, 0.1, 0.05 (in shuffled positions).
  const std::vector<double> q = {0.1, 0.4, 0.05, 0.3, 0.15};
  std::vector<float> l;
  for (double v : q) l.push_back(float(std::log(v)));
  const int n = 100000;
  {  // min-p 0.3: the bar is 0.12, so 0.1 and 0.05 go; 0.4, 0.3, 0.15 share 0.85.
    Sampler s(5, with_min_p(SamplingParams{1.0f, 0, 1.0f, 21}, 0.3f));
    std::vector<int> counts(5);
    for (int i = 0; i < n; ++i) ++counts[size_t(s.sample(l))];
    expect_matches({0, 0.4 / 0.85, 0, 0.3 / 0.85, 0.15 / 0.85}, counts, n);
  }
  {  // The same cut after top-k 4 (sorted candidates): 0.1 < 0.12 goes.
    Sampler s(5, with_min_p(SamplingParams{1.0f, 4, 1.0f, 22}, 0.3f));
    std::vector<int> counts(5);
    for (int i = 0; i < n; ++i) ++counts[size_t(s.sample(l))];
    expect_matches({0, 0.4 / 0.85, 0, 0.3 / 0.85, 0.15 / 0.85}, counts, n);
  }
  {  // min-p 0.5 after top-p 0.9 (keeps four): the bar 0.2 leaves 0.4 and 0.3.
    Sampler s(5, with_min_p(SamplingParams{1.0f, 0, 0.9f, 23}, 0.5f));
    std::vector<int> counts(5);
    for (int i = 0; i < n; ++i) ++counts[size_t(s.sample(l))];
    expect_matches({0, 0.4 / 0.7, 0, 0.3 / 0.7, 0}, counts, n);
  }
  {  // Temperature 2 flattens first: p ~ sqrt(q), so the bar sqrt(0.4) * 0.6 = 0.379 keeps
     // sqrt(0.4), sqrt(0.3) and sqrt(0.15) = 0.387, and drops sqrt(0.1) = 0.316.
    Sampler s(5, with_min_p(SamplingParams{2.0f, 0, 1.0f, 24}, 0.6f));
    std::vector<int> counts(5);
    for (int i = 0; i < n; ++i) ++counts[size_t(s.sample(l))];
    const double z = std::sqrt(0.4) + std::sqrt(0.3) + std::sqrt(0.15);
    expect_matches({0, std::sqrt(0.4) / z, 0, std::sqrt(0.3) / z, std::sqrt(0.15) / z}, counts,
                   n);
  }
  {  // min-p 1 keeps only the top token, whatever the draw.
    Sampler s(5, with_min_p(SamplingParams{1.0f, 0, 1.0f, 25}, 1.0f));
    for (int i = 0; i < 100; ++i) EXPECT_EQ(s.sample(l), 1);
  }
}

SamplingParams with_penalty(SamplingParams p, float penalty, int last_n) {
  p.repeat_penalty = penalty;
  p.repeat_last_n = last_n;
  return p;
}

TEST(Sampler, RepeatPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  // Greedy: 2.0 / 1.25 = 1.6 falls below 1.9, so the penalised 0 loses to 1.
  const std::vector<float> l = {2.0f, 1.9f, -1.0f, -1.2f};
  Sampler s(4, with_penalty(SamplingParams{0.0f, 0, 1.0f, 1}, 1.25f, 64));
  EXPECT_EQ(s.sample(l), 0);  // nothing observed yet
  s.observe(0);
  EXPECT_TRUE(s.penalises());
  EXPECT_EQ(s.sample(l), 1);
  EXPECT_EQ(s.signals().max_logit, 1.9f);
  EXPECT_EQ(s.sampled_logits(l)[0], 1.6f);
  s.observe(1);  // 1.9 / 1.25 = 1.52 < 1.6
  EXPECT_EQ(s.sample(l), 0);
  // Negative logits are multiplied: -1.0 * 1.25 = -1.25 falls below -1.2.
  const std::vector<float> neg = {-1.0f, -1.2f};
  Sampler t(2, with_penalty(SamplingParams{0.0f, 0, 1.0f, 1}, 1.25f, 64));
  t.observe(0);
  EXPECT_EQ(t.sample(neg), 1);
  EXPECT_EQ(t.sampled_logits(neg)[0], -1.25f);
}

TEST(Sampler, RepeatPenaltyCountsEachIdOnceAndGivesExactProbabilities) {
  // Logits {1, 0}, id 0 seen three times with penalty 2: its logit is 0.5 (not 0.125), so
  // p(0) = e^0.5 / (e^0.5 + 1) = 0.62245933.
  const std::vector<float> l = {1.0f, 0.0f};
  Sampler s(2, with_penalty(SamplingParams{1.0f, 0, 1.0f, 3}, 2.0f, 8));
  const std::vector<int32_t> seen = {0, 0, 0};
  s.observe(seen);
  s.sample(l);
  EXPECT_EQ(s.signals().max_logit, 0.5f);
  EXPECT_NEAR(s.signals().top_prob, 0.62245933f, 1e-6f);
  const int n = 100000;
  std::vector<int> counts(2);
  for (int i = 0; i < n; ++i) ++counts[size_t(s.sample(l))];
  expect_matches({0.62245933, 0.37754067}, counts, n);
  EXPECT_EQ(l[0], 1.0f);  // the caller's logits are never changed
}

TEST(Sampler, RepeatPenaltyLooksOnlyAtTheLastNIds) {
  const std::vector<float> l = {2.0f, 1.9f, 1.8f, 0.0f};
  Sampler s(4, with_penalty(SamplingParams{0.0f, 0, 1.0f, 1}, 2.0f, 2));
  s.observe(0);
  s.observe(3);
  s.observe(3);  // the window of two now holds 3, 3: id 0 left it
  EXPECT_EQ(s.sample(l), 0);
  s.observe(0);  // 3, 0
  EXPECT_EQ(s.sample(l), 1);
  s.forget_context();
  EXPECT_EQ(s.sample(l), 0);
  // A span longer than the window keeps its tail: 1 and 0 are penalised, 2 wins.
  const std::vector<int32_t> ids = {2, 1, 0};
  s.observe(ids);
  EXPECT_EQ(s.sample(l), 2);
}

TEST(Sampler, RepeatPenaltyOffKeepsNoHistory) {
  const std::vector<float> l = {2.0f, 1.9f};
  for (const SamplingParams p : {with_penalty(SamplingParams{0.0f, 0, 1.0f, 1}, 1.0f, 64),
                                 with_penalty(SamplingParams{0.0f, 0, 1.0f, 1}, 3.0f, 0)}) {
    Sampler s(2, p);
    s.observe(0);
    EXPECT_FALSE(s.penalises());
    EXPECT_EQ(s.sample(l), 0);
    EXPECT_EQ(s.sampled_logits(l).data(), l.data());
  }
}

TEST(Sampler, TopPOverALargeVocabularyKeepsTheNucleus) {
  // 3000 tokens: more than the first sorted chunks, so the growing sort is exercised.
  const auto l = ramp_logits(3000, 21);
  std::vector<double> p(l.size());
  double z = 0;
  for (size_t i = 0; i < l.size(); ++i) z += p[i] = std::exp(double(l[i]));
  std::vector<size_t> order(l.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  double cum = 0;
  std::vector<bool> kept(l.size());
  for (size_t i : order) {
    kept[i] = true;
    cum += p[i] / z;
    if (cum >= 0.9) break;
  }
  Sampler s(3000, SamplingParams{1.0f, 0, 0.9f, 3});
  for (int i = 0; i < 3000; ++i) {
    const int32_t id = s.sample(l);
    ASSERT_TRUE(kept[size_t(id)]) << "token " << id << " is outside the nucleus";
  }
}

TEST(Sampler, SignalsGiveEntropyAndTopProbability) {
  Sampler uniform(4, SamplingParams{1.0f, 0, 1.0f, 1});
  uniform.sample(std::vector<float>{2.0f, 2.0f, 2.0f, 2.0f});
  EXPECT_NEAR(uniform.signals().entropy, std::log(4.0), 1e-5);
  EXPECT_NEAR(uniform.signals().top_prob, 0.25, 1e-6);

  Sampler greedy(3, SamplingParams{});
  greedy.sample(std::vector<float>{0.0f, 100.0f, 0.0f});
  EXPECT_NEAR(greedy.signals().entropy, 0.0, 1e-5);
  EXPECT_NEAR(greedy.signals().top_prob, 1.0, 1e-6);
}

}  // namespace
}  // namespace infer
