// Retrieval accuracy on the e2b-mini fixture (recall_harness.h): a 16-token excerpt of one of
// 64 stored episodes ranks that episode first.
#include <gtest/gtest.h>

#include "model/model.h"
#include "model/thread_pool.h"
#include "test/memory/recall_harness.h"
#include "test/test_paths.h"

namespace infer {
namespace {

TEST(RecallAccuracy, AnExcerptRecallsItsEpisodeFirstOnE2bMini) {
  ThreadPool pool(2);
  auto m = Model::load(test::repo_fixtures() / "gemma4-text" / "e2b-mini",
                       LoadOptions{Quant::kAsStored, EmbedScale::kTableDtype}, pool);
  ASSERT_TRUE(m.ok()) << m.error().message;
  test::RecallSetup su;
  for (int prefix : {0, 16}) {
    su.prefix_tokens = prefix;
    const auto r = test::measure_recall(*m.value(), pool, su);
    EXPECT_GE(r.recall_at1, 0.9) << "prefix " << prefix;
    EXPECT_GE(r.recall_at3, r.recall_at1);
    EXPECT_GT(r.mean_true_cos, r.mean_best_other_cos);
  }
}

}  // namespace
}  // namespace infer
