// The base of the GPU forward tests parametrized over the repo's golden fixtures
// (test::kFixtureCases): the fixture's directory and golden file, and a small thread pool.
#ifndef INFER_TEST_GPU_FORWARD_FIXTURE_TEST_H_
#define INFER_TEST_GPU_FORWARD_FIXTURE_TEST_H_

#include <gtest/gtest.h>

#include <filesystem>

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

  ThreadPool pool_{2};
  std::filesystem::path dir_;
  test::FixtureGolden golden_;
};

}  // namespace infer::gpu

#endif  // INFER_TEST_GPU_FORWARD_FIXTURE_TEST_H_
