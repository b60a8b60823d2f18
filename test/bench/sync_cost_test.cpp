// The bench's ordering costs (bench/sync_cost.h): the figures come back positive, the probe's
// grid barriers (by generation and by count) hold with one workgroup (its ordering check of several runs on the H200: the
// bench's grid_barrier_ok), and a grid that is not resident is reported, not hung on.
#include "bench/sync_cost.h"

#include <gtest/gtest.h>

#include <string>

#include "test/gpu/gpu_test_env.h"

namespace infer::bench {
namespace {

using gpu::GpuTest;

using GpuSyncCost = GpuTest;

TEST_F(GpuSyncCost, MeasuresDispatchesAndAGridBarrierOfOneWorkgroup) {
  auto cost = measure_sync_cost(*ctx_, /*dispatches=*/16, /*phases=*/64, /*grid_groups=*/1,
                                /*local_size=*/64, /*passes=*/2);
  ASSERT_TRUE(cost.ok()) << cost.error().message;
  EXPECT_GT(cost->dependent_dispatch_us, 0.0);
  EXPECT_GT(cost->free_dispatch_us, 0.0);
  EXPECT_GT(cost->grid_barrier_us, 0.0);
  EXPECT_GT(cost->grid_barrier_count_us, 0.0);
  EXPECT_EQ(cost->grid_groups, 1u);
  EXPECT_TRUE(cost->grid_barrier_ok);
  EXPECT_TRUE(cost->grid_barrier_count_ok);
}

// lavapipe runs a dispatch's workgroups a few at a time, so a grid of 64 never meets at its first
// barrier: the spinning ones give up and the result says the figure means nothing. (On a GPU
// that holds the grid, the H200, the bench reports grid_barrier_ok true.)
TEST_F(GpuSyncCost, ReportsAGridThatIsNotResidentInsteadOfHanging) {
  auto cost = measure_sync_cost(*ctx_, 4, 16, /*grid_groups=*/64, 64, 1);
  ASSERT_TRUE(cost.ok()) << cost.error().message;
  EXPECT_EQ(cost->grid_groups, 64u);
  if (ctx_->info().name.find("llvmpipe") != std::string::npos) {
    EXPECT_FALSE(cost->grid_barrier_ok);
    EXPECT_FALSE(cost->grid_barrier_count_ok);
  }
}

TEST_F(GpuSyncCost, RejectsAnEmptyMeasurement) {
  EXPECT_FALSE(measure_sync_cost(*ctx_, 0).ok());
  EXPECT_FALSE(measure_sync_cost(*ctx_, 4, 0).ok());
}

}  // namespace
}  // namespace infer::bench
