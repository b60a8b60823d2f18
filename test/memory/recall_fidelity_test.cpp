// The logit fidelity of recalled rows on e2b-mini (bench/recall_fidelity.h; the curve and the
// command that prints it are in docs/MEMORY.md, Fidelity).
#include <cmath>

#include <gtest/gtest.h>

#include "bench/recall_fidelity.h"
#include "test/test_paths.h"

namespace infer {
namespace {

TEST(RecallFidelity, KlDivergenceIsZeroOnlyForEqualDistributions) {
  const float a[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  const float shifted[4] = {11.0f, 12.0f, 13.0f, 14.0f};  // the same softmax
  const float b[4] = {4.0f, 3.0f, 2.0f, 1.0f};
  EXPECT_NEAR(bench::kl_divergence(a, shifted, 4), 0.0, 1e-12);
  // Σ p_i (a_i - b_i) with p = softmax(a): the log-partitions cancel as a and b are permutations.
  double z = 0, kl = 0;
  for (float x : a) z += std::exp(double(x));
  for (int i = 0; i < 4; ++i) kl += std::exp(double(a[i])) / z * (double(a[i]) - b[i]);
  EXPECT_NEAR(bench::kl_divergence(a, b, 4), kl, 1e-9);
  EXPECT_GT(kl, 1.0);
}

TEST(RecallFidelity, CodedRowsKeepTheLogitsOfTheRawRowsOnE2bMini) {
  ThreadPool pool(2);
  auto m = Model::load(test::repo_fixtures() / "gemma4-text" / "e2b-mini",
                       LoadOptions{Quant::kAsStored, EmbedScale::kTableDtype}, pool);
  ASSERT_TRUE(m.ok()) << m.error().message;
  bench::FidelitySetup su;
  su.queries = 4;
  su.dir = ::testing::TempDir();
  const memory::SrvqConfig defaults;  // the codec EpisodicMemory uses
  memory::SrvqConfig coarse;
  coarse.stages = 1;
  const memory::SrvqConfig codecs[] = {defaults, coarse};
  auto rep = bench::measure_fidelity(*m.value(), pool, su, codecs);
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  const bench::FidelityReport& r = rep.value();
  ASSERT_EQ(r.positions, su.queries * su.follow_tokens);
  EXPECT_EQ(r.first_hits, su.queries);
  // The raw rows placed twice give the same logits, bit for bit: any difference below is the
  // codec's.
  EXPECT_EQ(r.repeat.kl_max, 0.0);
  EXPECT_EQ(r.repeat.greedy, 1.0);
  // The recall moves the logits (else the comparison below says nothing) ...
  EXPECT_GT(r.none.kl_mean, 1e-3);
  // ... and coded rows stay much closer to the raw rows than no recall, more so with 8 stages
  // than with 1.
  const bench::CodecFidelity& def = r.codecs[0];
  const bench::CodecFidelity& one = r.codecs[1];
  EXPECT_LT(def.bits_per_element, 2.5);
  EXPECT_LT(def.vs_raw.kl_mean, r.none.kl_mean / 4);
  EXPECT_LT(def.vs_raw.kl_mean, one.vs_raw.kl_mean);
  EXPECT_GE(def.vs_raw.greedy, 0.9);
  EXPECT_GE(def.vs_raw.greedy, r.none.greedy);
}

}  // namespace
}  // namespace infer
