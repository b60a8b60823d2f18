// The GPU ring tests' fixture (ring_forward_test.cpp, ring_sink_gpu_test.cpp): the fixtures'
// models loaded as the golden oracle, GPU forwards over a ring, and a greedy stream's logits.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "gpu/gpu_forward.h"
#include "model/cpu_forward.h"
#include "model/kv_ring_api.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "test/gpu/gpu_test_env.h"
#include "test/model/golden_fixture.h"
#include "test/model/ring_test_util.h"
#include "test/test_paths.h"

namespace infer::gpu::test_ring {

constexpr float kTol = test::kGoldenTol;
const LoadOptions kOracleLoad{Quant::kAsStored, EmbedScale::kF32};

using infer::test::pseudo_ids;
using infer::test::ring;

inline float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  return test::max_abs_diff(a.data(), b.data(), int64_t(std::min(a.size(), b.size())));
}

// Resident set size in kB (Linux), for the flat-memory check.
inline int64_t rss_kb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

class RingGpu : public GpuTest {
 protected:
  std::unique_ptr<Model> load(const char* name) {
    dir_ = test::repo_fixtures() / "gemma4-text" / name;
    golden_ = test::read_fixture_golden(dir_);
    auto m = Model::load(dir_, kOracleLoad, pool_);
    EXPECT_TRUE(m.ok()) << m.error().message;
    return m.ok() ? std::move(m).value() : nullptr;
  }
  std::unique_ptr<GpuForward> gpu(const Model& model, const RingConfig& c, int64_t chunk) {
    auto f = GpuForward::create(*ctx_, model, pool_, c, chunk);
    EXPECT_TRUE(f.ok()) << f.error().message;
    return f.ok() ? std::move(f).value() : nullptr;
  }
  // All logits of prefilling ids, then `steps` greedy decode steps' logits; tokens chosen.
  static std::vector<float> stream(Forward& fwd, const std::vector<int32_t>& ids, int64_t steps,
                                   int64_t V, std::vector<int32_t>* tokens) {
    std::vector<float> out(ids.size() * size_t(V));
    EXPECT_TRUE(fwd.prefill(ids, out.data(), true).ok());
    int32_t next = test::argmax(out.data() + out.size() - size_t(V), V);
    std::vector<float> logits(static_cast<size_t>(V));
    for (int64_t k = 0; k < steps; ++k) {
      tokens->push_back(next);
      EXPECT_TRUE(fwd.decode(next, logits.data()).ok());
      out.insert(out.end(), logits.begin(), logits.end());
      next = test::argmax(logits.data(), V);
    }
    return out;
  }

  ThreadPool pool_{2};
  std::filesystem::path dir_;
  test::FixtureGolden golden_;
};

}  // namespace infer::gpu::test_ring
