// The forward with a choice that keeps what it computes made the other way (long rows on their
// own product shape), against the default, on every fixture architecture: the same greedy
// tokens with logits within the fixtures' bound through both decode paths. forward_test.cpp
// checks the default against the CPU and the golden files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gpu/gpu_forward.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "test/gpu/forward_fixture_test.h"
#include "test/gpu/gpu_test_env.h"
#include "test/model/golden_fixture.h"
#include "test/test_paths.h"

namespace infer::gpu {
namespace {

using Case = test::FixtureCase;

class ForwardShapesGpu : public GpuFixtureTest {
 protected:
  // A forward made with the tuning overrides `spec` (--gpu-tune's syntax).
  std::unique_ptr<GpuForward> make(const Model& model, const std::string& spec) {
    const ScopedTuning tuning(*ctx_, spec);
    return make_forward(model);
  }

  // Greedy from the prompt through decode (8 steps, logits) then decode_greedy (8 steps, each
  // followed by a decode of its id): the ids fed and returned, and decode's logits.
  struct Greedy {
    std::vector<int32_t> ids;
    std::vector<std::vector<float>> logits;
  };

  // Runs `f` greedily into *got. With `want`, the default's run: the same ids (so the other
  // forward is fed what the default was, as if side by side) and logits within the fixtures'
  // bound (both sum in f32; only the reduction order differs).
  void greedy(GpuForward& f, const Greedy* want, Greedy* got) {
    const int64_t V = golden_.vocab;
    std::vector<float> a(static_cast<size_t>(V));
    ASSERT_TRUE(f.prefill(golden_.prompt_ids, a.data()).ok());
    float worst = 0;
    for (int k = 0; k < 16; ++k) {
      int32_t id = test::argmax(a.data(), V);
      got->ids.push_back(id);
      if (k >= 8) {  // decode_greedy, then decode of the id it returned
        auto x = f.decode_greedy(id);
        ASSERT_TRUE(x.ok()) << x.error().message;
        got->ids.push_back(id = *x);
      }
      if (want != nullptr) {
        const auto n = std::ptrdiff_t(got->ids.size());
        ASSERT_EQ(got->ids, std::vector<int32_t>(want->ids.begin(), want->ids.begin() + n))
            << "step " << k;
      }
      ASSERT_TRUE(f.decode(id, a.data()).ok());
      if (k >= 8) continue;
      if (want != nullptr) {
        worst = std::max(worst, test::max_abs_diff(a.data(), want->logits[k].data(), V));
      }
      got->logits.push_back(a);
    }
    EXPECT_LE(worst, test::kGoldenTol);
  }

  // `on` against the default's run.
  void expect_same_decode(GpuForward& on, const Greedy& off) {
    Greedy got;
    greedy(on, &off, &got);
  }

  // `other` fed what `reference` was fed and returned, with its logits within the bound.
  void expect_same_run(GpuForward& reference, GpuForward& other) {
    Greedy reference_run;
    greedy(reference, nullptr, &reference_run);
    ASSERT_FALSE(HasFatalFailure());
    expect_same_decode(other, reference_run);
  }
};

// Long rows on their own products (long_row_subgroups=8; long_row_cols one past the hidden
// size: the products over the stream, whose rows are H long, keep the default shape, the
// wider ones, such as the MLP's down projection, take the long one): a decode step records
// products on both shapes (SUBGROUPS is spec 3 in a pipeline's name) and keeps the tokens.
TEST_P(ForwardShapesGpu, LongRowProductsOnTheirOwnShapeKeepTheTokens) {
  auto m = Model::load(dir_, LoadOptions{Quant::kAsStored, EmbedScale::kF32}, pool_);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const Model& model = **m;
  std::unique_ptr<GpuForward> off = make(model, "long_row_subgroups=0");
  std::unique_ptr<GpuForward> on =
      make(model, "long_row_subgroups=8,long_row_cols=" +
                      std::to_string(model.config().text.hidden_size + 1));
  ASSERT_TRUE(on != nullptr && off != nullptr);
  expect_same_run(*off, *on);
  ASSERT_FALSE(HasFatalFailure());
  // After the run: profiling a step moves the forward on.
  auto profile = on->profile(std::vector<int32_t>{golden_.prompt_ids.front()});
  ASSERT_TRUE(profile.ok()) << profile.error().message;
  int products = 0, long_products = 0;
  for (const CommandTime& c : *profile) {  // e.g. matvec_bf16{0=64,1=2,2=1,3=8,5=4}
    if (c.label.rfind("matvec_", 0) != 0) continue;
    ++products;
    long_products += c.label.find(",3=8,") != std::string::npos;
  }
  EXPECT_GT(long_products, 0);
  EXPECT_LT(long_products, products);
}

INSTANTIATE_TEST_SUITE_P(ForwardFixtures, ForwardShapesGpu,
                         ::testing::ValuesIn(test::kArchitectureCases),
                         test::ParamName());

}  // namespace
}  // namespace infer::gpu
