// The base of the GPU forward tests parametrized over the repo's golden fixtures
// (test::kFixtureCases): the fixture's directory and golden file, a small thread pool, and a way
// to make a forward.
#ifndef INFER_TEST_GPU_FORWARD_FIXTURE_TEST_H_
#define INFER_TEST_GPU_FORWARD_FIXTURE_TEST_H_

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "gpu/gpu_forward.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "test/gpu/gpu_test_env.h"
#include "test/model/golden_fixture.h"
#include "test/test_paths.h"

namespace infer::gpu {

class GpuFixtureTest : public GpuTest, public ::testing::WithParamInterface<test::FixtureCase> {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (HasFatalFailure()) return;
    dir_ = test::repo_fixtures() / "gemma4-text" / GetParam().dir;
    golden_ = test::read_fixture_golden(dir_);
    ASSERT_FALSE(golden_.prompt_ids.empty());
  }

  // A GPU forward of `model` (chunks of 8 tokens, the fixtures' positions), made under whatever
  // environment the caller has set; null on a failure (reported).
  std::unique_ptr<GpuForward> make_forward(const Model& model) {
    auto f = GpuForward::create(*ctx_, model, pool_, test::kGoldenMaxPositions, 8);
    EXPECT_TRUE(f.ok()) << f.error().message;
    return f.ok() ? std::move(f).value() : nullptr;
  }

  ThreadPool pool_{2};
  std::filesystem::path dir_;
  test::FixtureGolden golden_;
};

}  // namespace infer::gpu

#endif  // INFER_TEST_GPU_FORWARD_FIXTURE_TEST_H_
