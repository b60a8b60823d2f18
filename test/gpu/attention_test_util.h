// Helpers of the GPU attention tests (qkv_prep_test.cpp, attention_test.cpp): device buffers of
// floats, the step buffer, RoPE tables and the closeness check against the CPU reference.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "base/check.h"
#include "gpu/buffer.h"
#include "gpu/ops/attention.h"
#include "model/config.h"
#include "shaders/step.h"
#include "test/gpu/gpu_test_env.h"
#include "test/gpu/host_matrix.h"

namespace infer::gpu {

// Suites start with "Attention" so --gtest_filter='Attention*' selects them all.
using AttentionTest = GpuTest;

inline constexpr uint32_t kMaxChunk = 64;

inline Buffer device_buffer(const VulkanContext& ctx, const std::vector<float>& data,
                            const char* name) {
  auto b = Buffer::create(ctx, data.size() * sizeof(float), BufferKind::kDevice, name);
  INFER_CHECK(b.ok(), "%s", b.error().message.c_str());
  auto r = upload(ctx, *b, 0, data.data(), data.size() * sizeof(float));
  INFER_CHECK(r.ok(), "%s", r.error().message.c_str());
  return std::move(*b);
}

inline std::vector<float> download_floats(const VulkanContext& ctx, const Buffer& b, size_t n) {
  std::vector<float> v(n, NAN);
  auto r = download(ctx, b, 0, v.data(), n * sizeof(float));
  INFER_CHECK(r.ok(), "%s", r.error().message.c_str());
  return v;
}

// The step buffer as the forward pass keeps it: host-visible words the host rewrites per submit.
struct StepBuffer {
  Buffer buffer;
  explicit StepBuffer(const VulkanContext& ctx) {
    auto b = Buffer::create(ctx, INFER_STEP_WORDS(kMaxChunk) * sizeof(uint32_t), BufferKind::kHost,
                            "step");
    INFER_CHECK(b.ok(), "%s", b.error().message.c_str());
    buffer = std::move(*b);
  }
  void set(uint32_t pos0, uint32_t T) {
    uint32_t words[INFER_STEP_WORDS(kMaxChunk)] = {};
    words[INFER_STEP_POS0] = pos0;
    words[INFER_STEP_T] = T;
    std::memcpy(buffer.mapped(), words, sizeof(words));
  }
};

inline std::unique_ptr<AttentionOps> make_ops(const VulkanContext& ctx, uint32_t max_T,
                                              uint32_t max_n_q, uint32_t max_d,
                                              uint32_t max_positions) {
  auto ops = AttentionOps::create(ctx, {max_T, max_n_q, max_d, max_positions});
  INFER_CHECK(ops.ok(), "%s", ops.error().message.c_str());
  return std::move(*ops);
}

// inv_freq as the model builds it: sliding layers default RoPE, full layers proportional with
// zero tails (GEMMA4_TEXT.md §4.6).
inline std::vector<float> inv_freq_for(uint32_t d, bool proportional) {
  RopeParams rope;
  if (proportional) {
    rope.rope_type = "proportional";
    rope.rope_theta = 1e6;
    rope.partial_rotary_factor = 0.25;
  }
  return rope_inv_freq(rope, int(d));
}

// Element-wise |got - want| <= tol * (1 + |want|), at most 5 failures reported.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - want[i]);
    if (!(err <= tol * (1.0 + std::fabs(want[i]))) && ++bad <= 5) {
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", reference " << want[i];
    }
  }
  EXPECT_EQ(bad, 0) << what << ": of " << got.size();
}

}  // namespace infer::gpu
