// GpuForward::synthesize_context, the state --bench-context times decode from on the GPU: the
// ring's bookkeeping equals the CPU's after the same synthesize_context, every row holds the
// synthetic value, decode goes on from there with finite logits, and an exact cache refuses a state
// past its size.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "gpu/gpu_forward.h"
#include "model/cpu_forward.h"
#include "model/kv_ring_api.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "test/gpu/gpu_test_env.h"
#include "test/model/ring_test_util.h"
#include "test/test_paths.h"

namespace infer::gpu {
namespace {

class SyntheticContextGpu : public GpuTest {
 protected:
  std::unique_ptr<Model> load() {
    auto m = Model::load(test::repo_fixtures() / "gemma4-text" / "e2b-mini", LoadOptions{}, pool_);
    EXPECT_TRUE(m.ok()) << m.error().message;
    return m.ok() ? std::move(m).value() : nullptr;
  }
  static bool all_finite(const std::vector<float>& v) {
    for (float x : v) {
      if (!std::isfinite(x)) return false;
    }
    return true;
  }
  ThreadPool pool_{2};
};

TEST_F(SyntheticContextGpu, RingStateIsTheCpuRingsAndDecodeGoesOn) {
  auto model = load();
  ASSERT_NE(model, nullptr);
  const RingConfig c = test::ring(4, 32, 8);
  auto f = GpuForward::create(*ctx_, *model, pool_, c, 8);
  ASSERT_TRUE(f.ok()) << f.error().message;
  GpuForward& gpu = **f;
  CpuForward cpu(*model, pool_, c, 8);
  const int64_t n = 300;
  ASSERT_TRUE(gpu.synthesize_context(n).ok());
  ASSERT_TRUE(cpu.synthesize_context(n).ok());
  EXPECT_EQ(gpu.position(), n);
  EXPECT_EQ(gpu.ring().n_anchors(), cpu.ring().n_anchors());
  EXPECT_EQ(gpu.ring().n_window(), cpu.ring().n_window());
  for (int32_t slot = 0; slot < int32_t(c.anchors + c.window); ++slot) {
    EXPECT_EQ(gpu.ring().pos_of(slot), cpu.ring().pos_of(slot)) << "slot " << slot;
  }
  // The newest window token's rows: the synthetic value in every float.
  KvBlock rows;
  ASSERT_TRUE(gpu.read_kv(n - 1, 1, &rows).ok());
  ASSERT_FALSE(rows.layers.empty());
  for (size_t l = 0; l < rows.layers.size(); ++l) {
    for (float x : rows.k[l]) ASSERT_EQ(x, 0.01f);
    for (float x : rows.v[l]) ASSERT_EQ(x, 0.01f);
  }
  std::vector<float> logits(size_t(gpu.vocab_size()));
  for (int k = 0; k < 3; ++k) {
    ASSERT_TRUE(gpu.decode(2 + k, logits.data()).ok());
    EXPECT_TRUE(all_finite(logits));
  }
  EXPECT_EQ(gpu.position(), n + 3);
  EXPECT_EQ(gpu.ring().n_window(), c.window);
}

TEST_F(SyntheticContextGpu, ExactCacheGoesOnAndRefusesAStatePastItsSize) {
  auto model = load();
  ASSERT_NE(model, nullptr);
  auto f = GpuForward::create(*ctx_, *model, pool_, 64, 8);
  ASSERT_TRUE(f.ok()) << f.error().message;
  GpuForward& gpu = **f;
  const auto past = gpu.synthesize_context(64);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(gpu.synthesize_context(-1).ok());
  ASSERT_TRUE(gpu.synthesize_context(40).ok());
  std::vector<float> logits(size_t(gpu.vocab_size()));
  ASSERT_TRUE(gpu.decode(5, logits.data()).ok());
  EXPECT_TRUE(all_finite(logits));
  EXPECT_EQ(gpu.position(), 41);
}

}  // namespace
}  // namespace infer::gpu
