// Helpers of the GPU attention tests (qkv_prep_test.cpp, attention_test.cpp): device buffers of
// floats, the step buffer, RoPE tables and the closeness check against the CPU reference.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/check.h"
#include "gpu/buffer.h"
#include "gpu/ops/attention.h"
#include "model/config.h"
#include "model/ops/attention.h"
#include "model/thread_pool.h"
#include "shaders/attention.h"
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
// max_keys > 0: room for the KV ring's words too (step.h: write slots, key slots).
struct StepBuffer {
  Buffer buffer;
  uint32_t words = 0;
  explicit StepBuffer(const VulkanContext& ctx, uint32_t max_keys = 0)
      : words(max_keys > 0 ? INFER_STEP_RING_WORDS(kMaxChunk, max_keys)
                           : INFER_STEP_WORDS(kMaxChunk)) {
    auto b = Buffer::create(ctx, words * sizeof(uint32_t), BufferKind::kHost, "step");
    INFER_CHECK(b.ok(), "%s", b.error().message.c_str());
    buffer = std::move(*b);
  }
  void set(uint32_t pos0, uint32_t T) { set_ring(pos0, T, 0, 0, {}); }
  // The ring modes' words: n_keys and n_slide, and the tiered layers' key slots.
  void set_ring(uint32_t pos0, uint32_t T, uint32_t n_keys, uint32_t n_slide,
                const std::vector<uint32_t>& key_slots) {
    std::vector<uint32_t> w(words, 0u);
    w[INFER_STEP_POS0] = pos0;
    w[INFER_STEP_T] = T;
    w[INFER_STEP_N_KEYS] = n_keys;
    w[INFER_STEP_N_SLIDE] = n_slide;
    INFER_CHECK(key_slots.empty() || INFER_STEP_KEYS(T) + key_slots.size() <= words,
                "step buffer: %zu key slots", key_slots.size());
    std::copy(key_slots.begin(), key_slots.end(), w.begin() + INFER_STEP_KEYS(T));
    std::memcpy(buffer.mapped(), w.data(), w.size() * sizeof(uint32_t));
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

// out is a convex combination of V rows (|v| <= 1). Score errors of the f32 dot products
// (~sqrt(d) eps |q||k|, random-walk) move the weights by as much relatively, and the device's
// exp adds a few ulp: 2e-5 absolute on O(1) outputs for d up to 512 and scores of tens.
inline constexpr double kAttendTol = 2e-5;
// Prompts (T > 1) take the tiled kernel's online softmax (shaders/attend_tiled.comp): each key
// tile rescales a row's running sum and output by exp(m_old - m_new), and split rows merge
// through one more exp, so a probability passes through up to three exps where the two-pass
// decode takes one. lavapipe's exp is not correctly rounded: a peaked case (scores of tens, T 64,
// window 40) erred by 2.15e-5 on outputs of 0.05. Twice the bound.
inline constexpr double kTiledAttendTol = 2 * kAttendTol;
// Normed and rotated q/K/V rows (qkv_prep.comp, attend_split_prep.glsl) against the CPU's: f32
// sums of squares in another order and the shaders' sincos, 1e-5 as qkv_prep_test.cpp allows.
inline constexpr double kPrepTol = 1e-5;

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

// Every position's K/V for a whole stream [0, n_pos), and the reference attention over them:
// the CPU sees all positions (no ring), so a GPU ring too small or a wrong slot shows up.
struct Stream {
  uint32_t n_kv, d;
  std::vector<float> k, v;  // [n_pos, n_kv, d]
};

inline Stream random_stream(uint32_t n_pos, uint32_t n_kv, uint32_t d, uint32_t seed) {
  return {n_kv, d, random_vector(size_t(n_pos) * n_kv * d, seed),
          random_vector(size_t(n_pos) * n_kv * d, seed + 1)};
}

inline std::vector<float> reference_attention(const Stream& s, const std::vector<float>& q,
                                              const AttentionDims& dims, uint32_t pos0) {
  AttentionShape shape;
  shape.T = dims.T;
  shape.pos0 = pos0;
  shape.n_q = dims.n_q;
  shape.n_kv = dims.n_kv;
  shape.d = dims.d;
  shape.window = dims.window;
  const size_t row = size_t(s.n_kv) * s.d;
  KvView kv;
  kv.cache_k = s.k.data();
  kv.cache_v = s.v.data();
  kv.slots = int64_t(pos0) + dims.T;  // never wraps: position p at row p
  kv.cache_begin = 0;
  kv.chunk_k = s.k.data() + pos0 * row;
  kv.chunk_v = s.v.data() + pos0 * row;
  std::vector<float> scores(pos0 + dims.T);
  AttentionScratch scratch{scores.data(), int64_t(scores.size()), 1};
  ThreadPool pool(1);
  std::vector<float> out(size_t(dims.T) * dims.n_q * dims.d);
  attention(q.data(), shape, kv, out.data(), scratch, pool);
  return out;
}

// GoogleTest names of parametrized attention cases: the KV mode, then KEY + value pairs. Appended
// piece by piece: GCC 12 warns (-Wrestrict, a false positive) on "W" + to_string(..).
struct CaseName {
  std::string text;
  explicit CaseName(uint32_t mode)
      : text(mode == INFER_KV_TIERED    ? "Tiered"
             : mode == INFER_KV_SLIDING ? "Sliding"
                                        : "Exact") {}
  CaseName& add(const char* key, uint32_t value) {
    text += key;
    text += std::to_string(value);
    return *this;
  }
};

}  // namespace infer::gpu
