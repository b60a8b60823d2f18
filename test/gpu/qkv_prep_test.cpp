// GPU qkv_prep vs the CPU reference (model/ops/rms_norm, rope): norms, RoPE and ring writes from
// the stacked q|k|v rows, decode and chunks at pos0 > 0, wrapped rings, K=V, KV-shared layers.
#include "gpu/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "base/check.h"
#include "gpu/buffer.h"
#include "model/config.h"
#include "model/ops/attention.h"
#include "model/ops/rms_norm.h"
#include "model/ops/rope.h"
#include "model/thread_pool.h"
#include "shaders/step.h"
#include "test/gpu/gpu_test_env.h"
#include "test/gpu/attention_test_util.h"

namespace infer::gpu {
namespace {

struct QkvCase {
  uint32_t T, pos0, n_q, n_kv, d, slots;
  bool k_eq_v;
  bool proportional;
};

void PrintTo(const QkvCase& c, std::ostream* os) {
  *os << "T " << c.T << " pos0 " << c.pos0 << " n_q " << c.n_q << " n_kv " << c.n_kv << " d "
      << c.d << " slots " << c.slots << (c.k_eq_v ? " k=v" : "")
      << (c.proportional ? " proportional" : "");
}

// RMSNorm in f32 on the GPU vs double sums on the CPU: ~sqrt(d) eps relative; sin/cos of the
// f32 angle within 1e-7 absolute (shaders/common/rope.glsl); values are O(1). 1e-5 leaves a wide
// margin yet catches any wrong pair, position, slot or missing weight.
constexpr double kQkvTol = 1e-5;

// Rows [T, n_q·d + n_kv·d (+ n_kv·d)] of q, k and v (v empty: K=V, v read at k), as the stacked
// q|k|v projection writes them; sets shape's stride and offsets.
std::vector<float> stack_qkv(const std::vector<float>& q, const std::vector<float>& k,
                             const std::vector<float>& v, const QkvCase& c, QkvShape* shape) {
  const size_t qr = size_t(c.n_q) * c.d, kr = size_t(c.n_kv) * c.d;
  const size_t stride = qr + kr + (v.empty() ? 0 : kr);
  std::vector<float> out;
  for (uint32_t t = 0; t < c.T; ++t) {
    out.insert(out.end(), q.begin() + t * qr, q.begin() + (t + 1) * qr);
    out.insert(out.end(), k.begin() + t * kr, k.begin() + (t + 1) * kr);
    if (!v.empty()) out.insert(out.end(), v.begin() + t * kr, v.begin() + (t + 1) * kr);
  }
  shape->stride = uint32_t(stride);
  shape->k_offset = uint32_t(qr);
  shape->v_offset = uint32_t(v.empty() ? qr : qr + kr);
  return out;
}

void check_qkv_prep(const VulkanContext& ctx, const QkvCase& c) {
  const size_t q_n = size_t(c.T) * c.n_q * c.d, kv_n = size_t(c.T) * c.n_kv * c.d;
  const size_t cache_n = size_t(c.slots) * c.n_kv * c.d;
  const uint32_t seed = c.T * 131 + c.pos0 + c.d;
  const std::vector<float> q = random_vector(q_n, seed, -2.0f, 2.0f);
  const std::vector<float> k = random_vector(kv_n, seed + 1, -2.0f, 2.0f);
  const std::vector<float> v = c.k_eq_v ? k : random_vector(kv_n, seed + 2, -2.0f, 2.0f);
  const std::vector<float> q_norm = random_vector(c.d, seed + 3, 0.5f, 1.5f);
  const std::vector<float> k_norm = random_vector(c.d, seed + 4, 0.5f, 1.5f);
  const std::vector<float> inv_freq = inv_freq_for(c.d, c.proportional);
  // Old ring contents: rows the chunk does not write must keep them.
  const std::vector<float> k_old = random_vector(cache_n, seed + 5);
  const std::vector<float> v_old = random_vector(cache_n, seed + 6);

  // CPU: as model/forward_attention.cpp does it.
  const float eps = 1e-6f;
  std::vector<float> cos(size_t(c.T) * c.d / 2), sin(cos.size());
  rope_tables(inv_freq.data(), c.d / 2, c.pos0, c.T, cos.data(), sin.data());
  std::vector<float> q_ref = q, k_ref = k, v_ref = v;
  rms_norm(q_ref.data(), q_norm.data(), int64_t(c.T) * c.n_q, c.d, eps, q_ref.data());
  rope_apply(q_ref.data(), c.T, c.n_q, c.d, cos.data(), sin.data());
  rms_norm(k_ref.data(), k_norm.data(), int64_t(c.T) * c.n_kv, c.d, eps, k_ref.data());
  rope_apply(k_ref.data(), c.T, c.n_kv, c.d, cos.data(), sin.data());
  rms_norm(v_ref.data(), nullptr, int64_t(c.T) * c.n_kv, c.d, eps, v_ref.data());
  std::vector<float> k_cache_ref = k_old, v_cache_ref = v_old;
  const size_t row = size_t(c.n_kv) * c.d;
  for (uint32_t t = 0; t < c.T; ++t) {
    const size_t slot = (c.pos0 + t) % c.slots;
    std::copy_n(k_ref.begin() + t * row, row, k_cache_ref.begin() + slot * row);
    std::copy_n(v_ref.begin() + t * row, row, v_cache_ref.begin() + slot * row);
  }

  // The stacked matvec output: token rows [q | k | v], v absent on K=V layers (§4.5).
  QkvShape shape{c.T, c.n_q, c.n_kv, c.d, c.slots, eps};
  const std::vector<float> qkv = stack_qkv(q, k, c.k_eq_v ? std::vector<float>{} : v, c, &shape);

  auto ops = make_ops(ctx, kMaxChunk, c.n_q, c.d, c.slots);
  StepBuffer step(ctx);
  step.set(c.pos0, c.T);
  Buffer qkvb = device_buffer(ctx, qkv, "qkv");
  Buffer qb = device_buffer(ctx, std::vector<float>(q_n, NAN), "q_out");
  Buffer qn = device_buffer(ctx, q_norm, "q_norm"), kn = device_buffer(ctx, k_norm, "k_norm");
  Buffer fb = device_buffer(ctx, inv_freq, "inv_freq");
  Buffer kc = device_buffer(ctx, k_old, "k_cache"), vc = device_buffer(ctx, v_old, "v_cache");
  auto rec = Recorder::create(ctx);
  ASSERT_TRUE(rec.ok()) << rec.error().message;
  ASSERT_TRUE((*rec)->begin().ok());
  auto r = ops->qkv_prep(**rec, {&step.buffer}, shape, {&qkvb}, {&qn}, {&kn}, {&fb}, {&qb}, {&kc},
                         {&vc});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*rec)->dispatch_count(), 1);
  ASSERT_TRUE((*rec)->submit_and_wait().ok());

  expect_close(download_floats(ctx, qb, q_n), q_ref, kQkvTol, "q");
  // The raw projections stay as they were (K=V reads them after K is normed).
  expect_close(download_floats(ctx, qkvb, qkv.size()), qkv, 0.0, "qkv");
  expect_close(download_floats(ctx, kc, cache_n), k_cache_ref, kQkvTol, "k_cache");
  expect_close(download_floats(ctx, vc, cache_n), v_cache_ref, kQkvTol, "v_cache");
}


class GpuQkvPrep : public GpuTest, public ::testing::WithParamInterface<QkvCase> {};

TEST_P(GpuQkvPrep, MatchesCpuReference) { check_qkv_prep(*ctx_, GetParam()); }

// Decode (T 1) and chunks at pos0 > 0; rings smaller than the positions (the chunk wraps
// around: 7 tokens from 60 into 16 slots); positions up to 70000 for RoPE's range reduction;
// K=V with proportional RoPE as on full layers; GQA 8:1 and 2:1.
const QkvCase kQkvCases[] = {
    {1, 0, 8, 1, 256, 64, false, false},      {1, 5, 4, 2, 16, 8, false, false},
    {1, 70001, 8, 1, 512, 4096, true, true},  {7, 60, 4, 2, 16, 16, false, false},
    {7, 123, 2, 1, 256, 40, false, false},    {64, 300, 8, 1, 512, 100, true, true},
    {33, 65000, 8, 2, 256, 530, false, false}, {3, 9, 2, 2, 8, 5, true, false},
};

std::string qkv_name(const QkvCase& c) {
  return "T" + std::to_string(c.T) + "Pos" + std::to_string(c.pos0) + "Q" + std::to_string(c.n_q) +
         "Kv" + std::to_string(c.n_kv) + "D" + std::to_string(c.d) + "Slots" +
         std::to_string(c.slots) + (c.k_eq_v ? "KeqV" : "") + (c.proportional ? "Prop" : "");
}

INSTANTIATE_TEST_SUITE_P(Attention, GpuQkvPrep, ::testing::ValuesIn(kQkvCases),
                         [](const auto& info) { return qkv_name(info.param); });

// A KV-shared layer (n_kv = 0) passes no caches: only q is prepared, from rows of q alone.
TEST_F(AttentionTest, QkvPrepWithoutKOnlyPreparesQ) {
  const uint32_t T = 2, n_q = 4, d = 16, slots = 8;
  const std::vector<float> q = random_vector(T * n_q * d, 7), q_norm(d, 1.0f);
  const std::vector<float> inv_freq = inv_freq_for(d, false);
  auto ops = make_ops(*ctx_, 4, n_q, d, slots);
  StepBuffer step(*ctx_);
  step.set(3, T);
  Buffer qkvb = device_buffer(*ctx_, q, "qkv"), qn = device_buffer(*ctx_, q_norm, "q_norm");
  Buffer qb = device_buffer(*ctx_, std::vector<float>(q.size(), NAN), "q_out");
  Buffer fb = device_buffer(*ctx_, inv_freq, "inv_freq");
  auto rec = Recorder::create(*ctx_);
  ASSERT_TRUE(rec.ok());
  ASSERT_TRUE((*rec)->begin().ok());
  QkvShape shape{T, n_q, 0, d, slots, 1e-6f};
  shape.stride = n_q * d;
  ASSERT_TRUE(
      ops->qkv_prep(**rec, {&step.buffer}, shape, {&qkvb}, {&qn}, {}, {&fb}, {&qb}, {}, {}).ok());
  EXPECT_EQ((*rec)->dispatch_count(), 1);
  ASSERT_TRUE((*rec)->submit_and_wait().ok());
  std::vector<float> q_ref = q, cos(T * d / 2), sin(T * d / 2);
  rms_norm(q_ref.data(), q_norm.data(), T * n_q, d, 1e-6f, q_ref.data());
  rope_tables(inv_freq.data(), d / 2, 3, T, cos.data(), sin.data());
  rope_apply(q_ref.data(), T, n_q, d, cos.data(), sin.data());
  expect_close(download_floats(*ctx_, qb, q.size()), q_ref, kQkvTol, "q");
}

}  // namespace
}  // namespace infer::gpu
