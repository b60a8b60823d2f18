// cli/memory_check: MemAvailable parsing, the refusal's wording and figures, and the GPU rings'
// size by hand.
#include "cli/memory_check.h"

#include <gtest/gtest.h>

namespace infer::cli {
namespace {

TEST(MemoryCheck, ParsesMemAvailable) {
  EXPECT_EQ(parse_mem_available("MemTotal:       24000000 kB\nMemFree:  1 kB\n"
                                "MemAvailable:   22900000 kB\n"),
            size_t(22900000) * 1024);
  EXPECT_FALSE(parse_mem_available("MemTotal: 1 kB\n"));
  EXPECT_FALSE(parse_mem_available("MemAvailable: lots\n"));
}

TEST(MemoryCheck, WritesThousandsSeparators) {
  EXPECT_EQ(with_commas(16001056), "16,001,056");
  EXPECT_EQ(with_commas(999), "999");
  EXPECT_EQ(with_commas(1000), "1,000");
  EXPECT_EQ(with_commas(0), "0");
}

TEST(MemoryCheck, RefusesWhatDoesNotFitWithTheFigures) {
  EXPECT_TRUE(check_fits(1000, true, 100, 100, "this machine has").ok());
  const Result<void> r =
      check_fits(16001056, true, size_t(61.0e9), size_t(22.9e9), "this machine has");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnsupported);  // a runtime error: exit status 1
  EXPECT_EQ(r.error().message,
            "a KV ring of 16,001,056 positions needs 61.0 GB for this model; this machine has "
            "22.9 GB available (lower --window/--anchors)");
  const Result<void> g = check_fits(8192, false, size_t(512.3e6), size_t(256e6), "the device has");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().message,
            "a KV cache of 8,192 positions needs 512.3 MB for this model; the device has 256.0 MB "
            "available");
}

TEST(MemoryCheck, GpuRingsByHand) {
  // One sliding layer (2 x 16: 32 floats a row), one full (2 x 32 = 64), one KV-shared.
  ModelConfig cfg;
  cfg.text.sliding_window = 8;
  LayerPlan shared{LayerType::kFull, 32, 2};
  shared.kv_shared = true;
  cfg.layers = {LayerPlan{LayerType::kSliding, 16, 2}, LayerPlan{LayerType::kFull, 32, 2}, shared};
  // Ring A 4 + W 16 + R 0, chunk 256 cut to 16: full rows 20 + 16 staging, sliding 7 + 16.
  RingConfig ring;
  ring.anchors = 4;
  ring.window = 16;
  ring.recall = 0;
  EXPECT_EQ(gpu_kv_bytes(cfg, 0, 256, ring), 2u * (36 * 64 + 23 * 32) * 4);
  // Exact, 100 positions, chunk 32: full 100 rows, sliding min(7 + 32, 100).
  EXPECT_EQ(gpu_kv_bytes(cfg, 100, 32, std::nullopt), 2u * (100 * 64 + 39 * 32) * 4);
}

}  // namespace
}  // namespace infer::cli
