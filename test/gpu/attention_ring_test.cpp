// GPU attend in the KV ring's modes (shaders/common/kv_ring.glsl, docs/KV_RING.md) vs the CPU
// reference: K stored before RoPE and rotated at its cache position on load; tiered layers find
// key s at the step buffer's key_slots[s] and the chunk's own rows in staging slots after the
// ring, sliding layers the last n_s positions before the chunk at logical % slots. Decode in
// both paths (two passes, the opt-in split) and prefill, GQA 1/2/8, d 16/256/512, 1 to 3000+
// keys. The mode is a specialization constant: each mode has its own pipelines.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "gpu/ops/attention.h"
#include "model/ops/rope.h"
#include "shaders/attention.h"
#include "shaders/step.h"
#include "test/gpu/attention_test_util.h"
#include "test/gpu/gpu_test_env.h"

namespace infer::gpu {
namespace {

struct RingCase {
  uint32_t mode;  // INFER_KV_TIERED or INFER_KV_SLIDING
  uint32_t n_q, n_kv, d;
  uint32_t window;  // sliding: W; tiered: 0
  uint32_t slots;   // ring rows (tiered: without the T staging rows)
  uint32_t T;
  uint32_t cached;  // tiered: n_keys; sliding: the logical pos0 (n_s = min(pos0, W - 1))
};

void PrintTo(const RingCase& c, std::ostream* os) {
  *os << "mode " << c.mode << " n_q " << c.n_q << " n_kv " << c.n_kv << " d " << c.d
      << " window " << c.window << " slots " << c.slots << " T " << c.T << " cached "
      << c.cached;
}

std::string ring_name(const RingCase& c) {
  CaseName name(c.mode);
  name.add("Q", c.n_q).add("Kv", c.n_kv).add("D", c.d);
  if (c.window) name.add("W", c.window);
  name.add("Slots", c.slots).add("T", c.T).add("Cached", c.cached);
  return name.text;
}

// One chunk attended in a ring mode: keys at cache positions 0 .. n + T - 1 (n = n_keys or
// n_s), unrotated in a NaN-filled ring at the mode's slots; the CPU sees the same keys rotated
// at their cache positions, queries at n + t.
void check_ring(const VulkanContext& ctx, const RingCase& c, uint32_t seed) {
  SCOPED_TRACE(ring_name(c));
  const bool tiered = c.mode == INFER_KV_TIERED;
  const uint32_t n = tiered ? c.cached : std::min(c.cached, c.window - 1);
  const uint32_t n_pos = n + c.T;  // cache positions
  const size_t row = size_t(c.n_kv) * c.d, q_n = size_t(c.T) * c.n_q * c.d;
  const uint32_t rows = c.slots + (tiered ? c.T : 0);
  Stream raw = random_stream(n_pos, c.n_kv, c.d, seed);

  // Where cache position s lives: tiered, a shuffled slot for s < n, staging after the ring;
  // sliding, (s + pos0 - n_s) % slots.
  std::vector<uint32_t> key_slots(c.slots);
  std::iota(key_slots.begin(), key_slots.end(), 0u);
  std::shuffle(key_slots.begin(), key_slots.end(), std::mt19937(seed));
  key_slots.resize(tiered ? n : 0);
  auto slot_of = [&](uint32_t s) {
    if (tiered) return s < n ? key_slots[s] : c.slots + (s - n);
    return (s + c.cached - n) % c.slots;
  };
  std::vector<float> k_ring(size_t(rows) * row, NAN), v_ring(size_t(rows) * row, NAN);
  for (uint32_t s = 0; s < n_pos; ++s) {
    std::copy_n(raw.k.begin() + s * row, row, k_ring.begin() + slot_of(s) * row);
    std::copy_n(raw.v.begin() + s * row, row, v_ring.begin() + slot_of(s) * row);
  }

  // The reference's keys: rotated at their cache position (full layers proportional RoPE).
  const std::vector<float> inv_freq = inv_freq_for(c.d, tiered);
  Stream rotated = raw;
  std::vector<float> cos(c.d / 2), sin(c.d / 2);
  for (uint32_t s = 0; s < n_pos; ++s) {
    rope_tables(inv_freq.data(), c.d / 2, s, 1, cos.data(), sin.data());
    rope_apply(rotated.k.data() + s * row, 1, c.n_kv, c.d, cos.data(), sin.data());
  }
  const float qs = 3.0f / std::sqrt(float(c.d));
  const std::vector<float> q = random_vector(q_n, seed + 7, -qs, qs);

  auto ops = make_ops(ctx, kMaxChunk, c.n_q, c.d, std::max(n_pos, c.slots + 1));
  StepBuffer step(ctx, std::max<uint32_t>(n, 1));
  step.set_ring(c.cached, c.T, tiered ? n : 0, tiered ? 0 : n, key_slots);
  Buffer kc = device_buffer(ctx, k_ring, "k_cache"), vc = device_buffer(ctx, v_ring, "v_cache");
  Buffer qb = device_buffer(ctx, q, "q"), fb = device_buffer(ctx, inv_freq, "inv_freq");
  Buffer ob = device_buffer(ctx, std::vector<float>(q_n, NAN), "out");
  AttentionDims dims{c.T, c.n_q, c.n_kv, c.d, c.slots, c.window};
  dims.mode = c.mode;
  auto rec = Recorder::create(ctx);
  ASSERT_TRUE(rec.ok()) << rec.error().message;
  ASSERT_TRUE((*rec)->begin().ok());
  auto r = ops->attend(**rec, {&step.buffer}, dims, {&qb}, {&kc}, {&vc}, {&ob}, {&fb});
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE((*rec)->submit_and_wait().ok());
  AttentionDims ref = dims;
  ref.mode = INFER_KV_EXACT;
  expect_close(download_floats(ctx, ob, q_n), reference_attention(rotated, q, ref, n),
               kAttendTol, "out");
}

const RingCase kRingCases[] = {
    // tiered decode: 1, 7, 640 and 3000+ keys (the token's own in staging)
    {INFER_KV_TIERED, 4, 4, 16, 0, 8, 1, 0},
    {INFER_KV_TIERED, 8, 1, 256, 0, 20, 1, 6},
    {INFER_KV_TIERED, 8, 1, 512, 0, 700, 1, 639},  // E2B's full layer at 640 keys
    {INFER_KV_TIERED, 2, 1, 512, 0, 3200, 1, 3100},
    {INFER_KV_TIERED, 16, 8, 256, 0, 700, 1, 650},  // 12B-like heads, GQA 2
    // sliding decode: ring of W - 1 + 1 slots, wrapped
    {INFER_KV_SLIDING, 8, 1, 256, 512, 512, 1, 2000},  // E2B's sliding layer
    {INFER_KV_SLIDING, 8, 2, 512, 100, 100, 1, 333},
    {INFER_KV_SLIDING, 8, 4, 16, 5, 5, 1, 3},  // the stream's start: n_s = pos0 < W - 1
    // prefill chunks
    {INFER_KV_TIERED, 8, 2, 256, 0, 300, 7, 250},
    {INFER_KV_SLIDING, 4, 1, 512, 48, 111, 64, 200},
};

class GpuAttendRing : public GpuTest, public ::testing::WithParamInterface<RingCase> {};

TEST_P(GpuAttendRing, MatchesCpuReference) { check_ring(*ctx_, GetParam(), 17); }

INSTANTIATE_TEST_SUITE_P(Attention, GpuAttendRing, ::testing::ValuesIn(kRingCases),
                         [](const auto& info) { return ring_name(info.param); });

// The decode cases again through the opt-in one-dispatch decode (its own pipelines per mode).
TEST_F(AttentionTest, RingSplitDecodeMatches) {
  const ScopedTuning env(*ctx_, "attn_split=on");
  for (const RingCase& c : kRingCases) {
    if (c.T == 1) check_ring(*ctx_, c, 29);
  }
}

}  // namespace
}  // namespace infer::gpu
