// Retrieval accuracy on the fixtures (recall_harness.h): a 16-token excerpt of one of 64 stored
// episodes ranks that episode first, with the default key (rows and ids) and with the rows alone
// (the fixtures' early K rows still carry the token, so the rows part must find it too).
#include <gtest/gtest.h>

#include "model/cpu_forward.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "test/memory/recall_harness.h"
#include "test/test_paths.h"

namespace infer {
namespace {

void expect_recall(const std::filesystem::path& dir, std::initializer_list<int> prefixes) {
  ThreadPool pool(2);
  auto m = Model::load(dir, LoadOptions{Quant::kAsStored, EmbedScale::kTableDtype}, pool);
  ASSERT_TRUE(m.ok()) << m.error().message;
  test::RecallSetup su;
  for (int prefix : prefixes) {
    su.prefix_tokens = prefix;
    CpuForward fwd(*m.value(), pool, test::recall_ring(su), 64);
    const test::RecallRows rows = test::collect_recall_rows(fwd, su);
    for (float id_weight : {su.assoc.id_weight, 0.0f}) {
      test::RecallSetup v = su;
      v.assoc.id_weight = id_weight;
      const auto r = test::score_recall(m.value()->config(), rows, v);
      EXPECT_GE(r.recall_at1, 0.9) << "prefix " << prefix << ", id weight " << id_weight;
      EXPECT_GE(r.recall_at3, r.recall_at1);
      EXPECT_GT(r.mean_true_cos, r.mean_best_other_cos);
    }
  }
}

TEST(RecallAccuracy, AnExcerptRecallsItsEpisodeFirstOnE2bMini) {
  expect_recall(test::repo_fixtures() / "gemma4-text" / "e2b-mini", {0, 16});
}

TEST(RecallAccuracy, AnExcerptRecallsItsEpisodeFirstOnE2bVocab) {
  expect_recall(test::shared_fixtures() / "gemma4-text" / "e2b-vocab", {0});
}

}  // namespace
}  // namespace infer
