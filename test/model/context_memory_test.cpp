// cpu_context_bytes: every term against hand-computed numbers for a three-layer config, and the
// KV rows against what a real CpuForward allocates (KvCache::bytes()), ring and exact.
#include "model/context_memory.h"

#include <gtest/gtest.h>

#include "model/cpu_forward.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "test/test_paths.h"

namespace infer {
namespace {

// Layer 0 sliding (n_kv 2 x d 16: a row of 32 floats), layer 1 full (2 x 32 = 64) and the donor
// of layer 2 (full, KV-shared). Sliding window 8: a sliding layer caches 7 positions.
ModelConfig three_layers() {
  ModelConfig cfg;
  cfg.text.sliding_window = 8;
  LayerPlan sliding{LayerType::kSliding, 16, 2};
  LayerPlan full{LayerType::kFull, 32, 2};
  full.is_donor = true;
  full.kv_source = 1;
  LayerPlan shared{LayerType::kFull, 32, 2};
  shared.kv_shared = true;
  shared.kv_source = 1;
  cfg.layers = {sliding, full, shared};
  return cfg;
}

TEST(ContextMemory, RingTermsMatchHandComputedBytes) {
  RingConfig ring;
  ring.anchors = 4;
  ring.window = 16;
  ring.recall = 0;  // capacity 20; chunks cut to the window: C = 16
  const ContextBytes b = cpu_context_bytes(three_layers(), 0, &ring);
  // K+V: sliding 2 * 7 * 32 * 4 = 1792, full 2 * 20 * 64 * 4 = 10240.
  EXPECT_EQ(b.kv_rows, 12032u);
  // Donor: chunk K/V 2 * 16 * 64 * 4 = 8192, gathered K/V and rotated chunk K
  // (2 * 20 * 64 + 16 * 64) * 4 = 14336; shared by the rest (row 32, 7 * 32 ring floats):
  // chunk K/V 2 * 16 * 32 * 4 = 4096, gathered (2 * 224 + 16 * 32) * 4 = 3840.
  EXPECT_EQ(b.kv_buffers, 8192u + 14336u + 4096u + 3840u);
  // RoPE over max(20, 8) + 16 = 36 positions: d/2 = 8 and 16, cos and sin, f32.
  EXPECT_EQ(b.rope, 2u * 36 * 8 * 4 + 2u * 36 * 16 * 4);
  // 21 bytes a slot, 24 a window slot (FIFO: no mass scores).
  EXPECT_EQ(b.bookkeeping, 20u * 21 + 16u * 24);
  EXPECT_EQ(b.total(), 12032u + 30464u + 6912u + 804u);
}

TEST(ContextMemory, ExactCacheTermsMatchHandComputedBytes) {
  const ContextBytes b = cpu_context_bytes(three_layers(), 100, nullptr);
  // Sliding 2 * 7 * 32 * 4, full 2 * 100 * 64 * 4.
  EXPECT_EQ(b.kv_rows, 1792u + 51200u);
  // Chunks of 256: the donor's 2 * 256 * 64 * 4, the shared pair 2 * 256 * 32 * 4.
  EXPECT_EQ(b.kv_buffers, 131072u + 65536u);
  EXPECT_EQ(b.rope, 0u);
  EXPECT_EQ(b.bookkeeping, 0u);
}

TEST(ContextMemory, KvRowsEqualWhatTheCpuForwardAllocates) {
  ThreadPool pool(1);
  auto m = Model::load(test::repo_fixtures() / "gemma4-text" / "e2b-mini", LoadOptions{}, pool);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const Model& model = **m;
  RingConfig ring;
  ring.anchors = 8;
  ring.window = 40;
  ring.recall = 5;
  CpuForward with_ring(model, pool, ring);
  EXPECT_EQ(cpu_context_bytes(model.config(), 0, &ring).kv_rows, with_ring.kv_bytes());
  CpuForward exact(model, pool, 300);
  EXPECT_EQ(cpu_context_bytes(model.config(), 300, nullptr).kv_rows, exact.kv_bytes());
}

}  // namespace
}  // namespace infer
