// Decode token by token: qkv_prep + attend (or prep_attend, qkv_prep folded into the split
// decode) recorded the same way for every token, only the step buffer changing, against the CPU
// layer (norms, RoPE, attention over every position): the output, q_out and the token's ring
// rows, in the exact KV mode, through both decode paths. The attention alone:
// attention_test.cpp; the ring modes: attention_ring_test.cpp, attention_prep_test.cpp.
#include <cmath>
#include <string>
#include <vector>

#include "gpu/ops/attention.h"
#include "model/ops/rms_norm.h"
#include "model/ops/rope.h"
#include "test/gpu/attention_test_util.h"
#include "test/gpu/gpu_test_env.h"

namespace infer::gpu {
namespace {

struct DecodeCase {
  uint32_t n_q, n_kv, d, window, slots, n_pos;
};

// Tokens 0 .. n_pos-1 one at a time: raw q/k/v in, the ring written by qkv_prep, attend over
// it (fused: prep_attend, one dispatch where the split decode takes it), against the CPU layer
// (norms, RoPE, attention over every position): the output, q_out and the token's ring rows.
// Recorder has no re-submit of a finished recording yet, so each token records the same ops
// again; the recording depends on nothing but the step buffer, rewritten before each submit.
void check_decode(const VulkanContext& ctx, const DecodeCase& c, bool fused = false) {
  SCOPED_TRACE("n_q " + std::to_string(c.n_q) + " n_kv " + std::to_string(c.n_kv) + " d " +
               std::to_string(c.d) + " window " + std::to_string(c.window) + " slots " +
               std::to_string(c.slots));
  const size_t q_n = size_t(c.n_q) * c.d, kv_n = size_t(c.n_kv) * c.d;
  const float eps = 1e-6f;
  const bool full = c.window == 0;
  // q_norm weights of ~3/sqrt(d): normed q and k give scores of a few units.
  std::vector<float> q_norm = random_vector(c.d, 1, 0.5f, 1.5f);
  for (float& w : q_norm) w *= 3.0f / std::sqrt(float(c.d));
  const std::vector<float> k_norm = random_vector(c.d, 2, 0.5f, 1.5f);
  const std::vector<float> inv_freq = inv_freq_for(c.d, full);
  auto ops = make_ops(ctx, 1, c.n_q, c.d, c.n_pos);
  StepBuffer step(ctx);
  Buffer qb = device_buffer(ctx, std::vector<float>(q_n), "q");
  Buffer qkvb = device_buffer(ctx, std::vector<float>(q_n + 2 * kv_n), "qkv");
  Buffer qn = device_buffer(ctx, q_norm, "q_norm"), kn = device_buffer(ctx, k_norm, "k_norm");
  Buffer fb = device_buffer(ctx, inv_freq, "inv_freq");
  const std::vector<float> nan_ring(size_t(c.slots) * kv_n, NAN);
  Buffer kc = device_buffer(ctx, nan_ring, "k_cache"), vc = device_buffer(ctx, nan_ring, "v_cache");
  Buffer ob = device_buffer(ctx, std::vector<float>(q_n, NAN), "out");
  auto rec = Recorder::create(ctx);
  ASSERT_TRUE(rec.ok()) << rec.error().message;
  QkvShape qkv{1, c.n_q, c.n_kv, c.d, c.slots, eps};  // rows [q | k | v]
  qkv.stride = uint32_t(q_n + 2 * kv_n);
  qkv.k_offset = uint32_t(q_n);
  qkv.v_offset = uint32_t(q_n + kv_n);
  const AttentionDims dims{1, c.n_q, c.n_kv, c.d, c.slots, c.window};

  Stream stream{c.n_kv, c.d, {}, {}};
  std::vector<float> cos(c.d / 2), sin(c.d / 2);
  for (uint32_t pos = 0; pos < c.n_pos; ++pos) {
    SCOPED_TRACE("pos " + std::to_string(pos));
    std::vector<float> q = random_vector(q_n, 3 * pos + 100, -1.0f, 1.0f);
    const std::vector<float> k = random_vector(kv_n, 3 * pos + 101);
    const std::vector<float> v = random_vector(kv_n, 3 * pos + 102);
    std::vector<float> row = q;
    row.insert(row.end(), k.begin(), k.end());
    row.insert(row.end(), v.begin(), v.end());
    ASSERT_TRUE(upload(ctx, qkvb, 0, row.data(), row.size() * 4).ok());
    step.set(pos, 1);
    ASSERT_TRUE((*rec)->begin().ok());
    if (fused) {
      ASSERT_TRUE(ops->prep_attend(**rec, {&step.buffer}, qkv, dims, {&qkvb}, {&qn}, {&kn},
                                   {&fb}, {&qb}, {&kc}, {&vc}, {&ob})
                      .ok());
      EXPECT_EQ((*rec)->dispatch_count(), ops->fused_prep(dims) ? 1u : 3u);
    } else {
      ASSERT_TRUE(ops->qkv_prep(**rec, {&step.buffer}, qkv, {&qkvb}, {&qn}, {&kn}, {&fb}, {&qb},
                                {&kc}, {&vc})
                      .ok());
      ASSERT_TRUE(ops->attend(**rec, {&step.buffer}, dims, {&qb}, {&kc}, {&vc}, {&ob}).ok());
    }
    ASSERT_TRUE((*rec)->submit_and_wait().ok());

    rope_tables(inv_freq.data(), c.d / 2, pos, 1, cos.data(), sin.data());
    rms_norm(q.data(), q_norm.data(), c.n_q, c.d, eps, q.data());
    rope_apply(q.data(), 1, c.n_q, c.d, cos.data(), sin.data());
    std::vector<float> kr = k, vr = v;
    rms_norm(kr.data(), k_norm.data(), c.n_kv, c.d, eps, kr.data());
    rope_apply(kr.data(), 1, c.n_kv, c.d, cos.data(), sin.data());
    rms_norm(vr.data(), nullptr, c.n_kv, c.d, eps, vr.data());
    stream.k.insert(stream.k.end(), kr.begin(), kr.end());
    stream.v.insert(stream.v.end(), vr.begin(), vr.end());
    const std::vector<float> want = reference_attention(stream, q, dims, pos);
    expect_close(download_floats(ctx, ob, q_n), want, kAttendTol, "out");
    expect_close(download_floats(ctx, qb, q_n), q, kPrepTol, "q_out");
    const size_t at = size_t(pos % c.slots) * kv_n;
    const std::vector<float> k_ring = download_floats(ctx, kc, size_t(c.slots) * kv_n);
    const std::vector<float> v_ring = download_floats(ctx, vc, size_t(c.slots) * kv_n);
    expect_close({k_ring.begin() + at, k_ring.begin() + at + kv_n}, kr, kPrepTol, "k ring row");
    expect_close({v_ring.begin() + at, v_ring.begin() + at + kv_n}, vr, kPrepTol, "v ring row");
    if (::testing::Test::HasFailure()) return;
  }
}

// Sliding: a ring of W slots (W - 1 + one decode token) wrapped several times; full: every
// position kept, proportional RoPE, splits appearing as the context grows past 64 keys.
TEST_F(AttentionTest, SplitDecodeStepsMatchCpuAtEveryPosition) {
  const ScopedTuning env(*ctx_, "attn_split=on");
  check_decode(*ctx_, {8, 1, 256, 24, 24, 90});
  check_decode(*ctx_, {4, 2, 16, 0, 150, 150});
  check_decode(*ctx_, {8, 1, 512, 0, 80, 80});
}

// The same with qkv_prep folded into the split decode (AttentionOps::prep_attend): one dispatch
// a token; the d-512 case goes the two-pass way (three dispatches) unless attn_split=1,
// as here, asks for the split at every d.
TEST_F(AttentionTest, FusedPrepDecodeStepsMatchCpuAtEveryPosition) {
  const ScopedTuning env(*ctx_, "attn_split=on");
  check_decode(*ctx_, {8, 1, 256, 24, 24, 90}, true);
  check_decode(*ctx_, {4, 2, 16, 0, 150, 150}, true);
  check_decode(*ctx_, {8, 1, 512, 0, 80, 80}, true);
  check_decode(*ctx_, {16, 8, 256, 0, 70, 70}, true);  // 12B's heads: two head groups a KV head
}

// The same token by token through the two-pass decode (attn_split=0 asks for it at every
// d): two dispatches (AttendRig::check counts them).
TEST_F(AttentionTest, TwoPassDecodeStepsMatchCpuAtEveryPosition) {
  const ScopedTuning env(*ctx_, "attn_split=off");
  check_decode(*ctx_, {8, 1, 256, 24, 24, 90});
  check_decode(*ctx_, {4, 2, 16, 0, 150, 150});
  check_decode(*ctx_, {8, 1, 512, 0, 80, 80});
}

}  // namespace
}  // namespace infer::gpu
