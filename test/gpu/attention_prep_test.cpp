// AttentionOps::prep_attend with qkv_prep folded into the split decode (attend_split_prep.glsl)
// against the two ops apart (qkv_prep, then attend; both checked against the CPU in
// qkv_prep_test.cpp and attention*_test.cpp) in every KV mode: the output, q_out and the whole
// ring after the token (the token's K/V rows where the mode stores them, nothing else touched).
// Also the KV-shared layers (q only, the token's key already in the donor's ring) and the token
// whose own key is alone in its split. Exact-mode decode steps against the CPU:
// attention_test.cpp (FusedPrepDecodeStepsMatchCpuAtEveryPosition).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "gpu/ops/attention.h"
#include "model/quant.h"
#include "shaders/attention.h"
#include "shaders/step.h"
#include "test/gpu/attention_test_util.h"
#include "test/gpu/gpu_test_env.h"

namespace infer::gpu {
namespace {

struct PrepCase {
  uint32_t mode;
  uint32_t n_q, n_kv, d;
  uint32_t window;  // sliding: W
  uint32_t slots;   // ring rows (tiered: without the staging row)
  uint32_t cached;  // keys before the token (tiered: n_keys; others: its position)
  bool shared;      // a KV-shared layer: q only
};

void PrintTo(const PrepCase& c, std::ostream* os) {
  *os << "mode " << c.mode << " n_q " << c.n_q << " n_kv " << c.n_kv << " d " << c.d
      << " window " << c.window << " slots " << c.slots << " cached " << c.cached
      << (c.shared ? " shared" : "");
}

std::string prep_name(const PrepCase& c) {
  CaseName name(c.mode);
  name.add("Q", c.n_q).add("Kv", c.n_kv).add("D", c.d);
  if (c.window) name.add("W", c.window);
  name.add("Slots", c.slots).add("Cached", c.cached);
  if (c.shared) name.text += "Shared";
  return name.text;
}

// One layer's buffers: the raw row, the ring (the same random rows in both runs), q_out, out.
struct PrepRun {
  Buffer qkv, k_ring, v_ring, q_out, out, out_int8;
};

void check_prep(const VulkanContext& ctx, const PrepCase& c, bool fused_ops = true) {
  SCOPED_TRACE(prep_name(c));
  const bool tiered = c.mode == INFER_KV_TIERED, sliding = c.mode == INFER_KV_SLIDING;
  const size_t q_n = size_t(c.n_q) * c.d, kv_n = size_t(c.n_kv) * c.d;
  const uint32_t rows = c.slots + (tiered ? 1 : 0);
  const uint32_t n = tiered ? c.cached : sliding ? std::min(c.cached, c.window - 1) : 0;
  std::vector<uint32_t> key_slots(c.slots);
  std::iota(key_slots.begin(), key_slots.end(), 0u);
  std::shuffle(key_slots.begin(), key_slots.end(), std::mt19937(c.cached + 3));
  key_slots.resize(tiered ? n : 0);

  // Ring rows of O(1) values: the keys before the token (a KV-shared layer's own too); the raw
  // row of q (scaled like normed ones), K and V.
  const std::vector<float> k_ring = random_vector(size_t(rows) * kv_n, 11);
  const std::vector<float> v_ring = random_vector(size_t(rows) * kv_n, 12);
  const std::vector<float> row = random_vector(q_n + 2 * kv_n, c.cached + 13, -2.0f, 2.0f);
  std::vector<float> q_norm = random_vector(c.d, 14, 0.5f, 1.5f);
  for (float& w : q_norm) w *= 3.0f / std::sqrt(float(c.d));
  const std::vector<float> k_norm = random_vector(c.d, 15, 0.5f, 1.5f);
  const std::vector<float> inv_freq = inv_freq_for(c.d, !sliding);

  auto ops = make_ops(ctx, 1, c.n_q, c.d, std::max(c.cached + 1, rows));
  StepBuffer step(ctx, std::max<uint32_t>(n, 1));
  step.set_ring(c.cached, 1, tiered ? n : 0, sliding ? n : 0, key_slots);
  Buffer qn = device_buffer(ctx, q_norm, "q_norm"), kn = device_buffer(ctx, k_norm, "k_norm");
  Buffer fb = device_buffer(ctx, inv_freq, "inv_freq");
  QkvShape qs{1, c.n_q, c.shared ? 0u : c.n_kv, c.d, c.slots, 1e-6f};
  qs.stride = uint32_t(q_n + 2 * kv_n);
  qs.k_offset = uint32_t(q_n);
  qs.v_offset = uint32_t(q_n + kv_n);
  qs.mode = c.mode;
  AttentionDims dims{1, c.n_q, c.n_kv, c.d, c.slots, c.window};
  dims.mode = c.mode;
  ASSERT_EQ(ops->fused_prep(dims), fused_ops);

  PrepRun runs[2];  // apart, fused
  for (int fused = 0; fused < 2; ++fused) {
    PrepRun& r = runs[fused];
    r.qkv = device_buffer(ctx, row, "qkv");
    r.k_ring = device_buffer(ctx, k_ring, "k_cache");
    r.v_ring = device_buffer(ctx, v_ring, "v_cache");
    r.q_out = device_buffer(ctx, std::vector<float>(q_n, NAN), "q_out");
    r.out = device_buffer(ctx, std::vector<float>(q_n, NAN), "out");
    auto rec = Recorder::create(ctx);
    ASSERT_TRUE(rec.ok()) << rec.error().message;
    ASSERT_TRUE((*rec)->begin().ok());
    if (fused) {
      // Where it can (d % 32 == 0), the fused run also writes out quantized (checked below).
      Binding out_int8;
      if (ops->writes_int8_out(dims)) {
        r.out_int8 = device_buffer(ctx, std::vector<float>((q_n + q_n / 8) / 4, NAN), "out_int8");
        out_int8 = Binding{&r.out_int8};
      }
      auto res = ops->prep_attend(**rec, {&step.buffer}, qs, dims, {&r.qkv}, {&qn}, {&kn}, {&fb},
                                  {&r.q_out}, {&r.k_ring}, {&r.v_ring}, {&r.out}, out_int8);
      ASSERT_TRUE(res.ok()) << res.error().message;
      EXPECT_EQ((*rec)->dispatch_count(), fused_ops ? 1u : 2u);
    } else {
      const Binding kc = c.shared ? Binding{} : Binding{&r.k_ring};
      const Binding vc = c.shared ? Binding{} : Binding{&r.v_ring};
      ASSERT_TRUE(ops->qkv_prep(**rec, {&step.buffer}, qs, {&r.qkv}, {&qn}, {&kn}, {&fb},
                                {&r.q_out}, kc, vc)
                      .ok());
      ASSERT_TRUE(ops->attend(**rec, {&step.buffer}, dims, {&r.q_out}, {&r.k_ring},
                              {&r.v_ring}, {&r.out}, {&fb})
                      .ok());
    }
    ASSERT_TRUE((*rec)->submit_and_wait().ok());
  }
  const size_t ring_n = size_t(rows) * kv_n;
  expect_close(download_floats(ctx, runs[1].out, q_n), download_floats(ctx, runs[0].out, q_n),
               kAttendTol, "out");
  expect_close(download_floats(ctx, runs[1].q_out, q_n),
               download_floats(ctx, runs[0].q_out, q_n), kPrepTol, "q_out");
  expect_close(download_floats(ctx, runs[1].k_ring, ring_n),
               download_floats(ctx, runs[0].k_ring, ring_n), kPrepTol, "k ring");
  expect_close(download_floats(ctx, runs[1].v_ring, ring_n),
               download_floats(ctx, runs[0].v_ring, ring_n), kPrepTol, "v ring");
  if (fused_ops) {
    EXPECT_EQ(ops->writes_int8_out(dims), c.d % 32 == 0);
  }
  if (ops->writes_int8_out(dims)) {
    // The int8 copy: the CPU's quantize_row_q8_0 of the fused run's own out, bit for bit (int8
    // quads [q_n], then f32 scales [q_n / 32]).
    const std::vector<float> out = download_floats(ctx, runs[1].out, q_n);
    const std::vector<float> got = download_floats(ctx, runs[1].out_int8, (q_n + q_n / 8) / 4);
    std::vector<BlockQ8_0> want(q_n / 32);
    quantize_row_q8_0(out.data(), want.data(), int64_t(q_n));
    for (size_t b = 0; b < want.size(); ++b) {
      EXPECT_EQ(got[q_n / 4 + b], fp16_to_f32(want[b].d)) << "block " << b;
      EXPECT_EQ(0, std::memcmp(reinterpret_cast<const uint8_t*>(got.data()) + 32 * b,
                               want[b].qs, 32))
          << "block " << b;
    }
  }
}

const PrepCase kPrepCases[] = {
    // exact: one split; the token alone in its split (65 keys, 32 a split); 12B's heads
    {INFER_KV_EXACT, 8, 1, 256, 0, 40, 20, false},
    {INFER_KV_EXACT, 8, 2, 64, 0, 100, 64, false},
    {INFER_KV_EXACT, 16, 8, 256, 0, 700, 639, false},
    {INFER_KV_EXACT, 8, 1, 256, 512, 512, 1500, false},  // a sliding layer's wrapped ring
    // tiered: the first token (only its own key), a few keys, many (GQA 2), d 16
    {INFER_KV_TIERED, 4, 4, 16, 0, 8, 0, false},
    {INFER_KV_TIERED, 8, 1, 256, 0, 20, 6, false},
    {INFER_KV_TIERED, 16, 8, 256, 0, 700, 650, false},
    // sliding: wrapped, and the stream's start (n_s = pos0 < W - 1)
    {INFER_KV_SLIDING, 8, 1, 256, 512, 512, 2000, false},
    {INFER_KV_SLIDING, 8, 4, 16, 5, 5, 3, false},
    // KV-shared layers in each mode
    {INFER_KV_EXACT, 8, 1, 256, 0, 40, 33, true},
    {INFER_KV_TIERED, 8, 1, 256, 0, 100, 70, true},
    {INFER_KV_SLIDING, 8, 1, 256, 512, 512, 900, true},
};

class GpuAttendPrep : public GpuTest, public ::testing::WithParamInterface<PrepCase> {};

TEST_P(GpuAttendPrep, FusedMatchesQkvPrepThenAttend) { check_prep(*ctx_, GetParam()); }

INSTANTIATE_TEST_SUITE_P(Attention, GpuAttendPrep, ::testing::ValuesIn(kPrepCases),
                         [](const auto& info) { return prep_name(info.param); });

// d 512 takes the two passes by default; with the split at every d the fused kernel's
// 16-key tiles and two dims an invocation.
TEST_F(AttentionTest, FusedPrepAtHeadDim512) {
  const ScopedTuning env(*ctx_, "attn_split=on");
  check_prep(*ctx_, {INFER_KV_TIERED, 8, 1, 512, 0, 700, 639, false});
  check_prep(*ctx_, {INFER_KV_EXACT, 8, 2, 512, 0, 80, 47, false});
}

// Several query heads a workgroup (attn_split_heads 2: 12B's GQA group whole; 3: a
// partial last head group) and 16-key tiles (attn_split_tile).
TEST_F(AttentionTest, FusedPrepWithHeadGroupsAndTiles) {
  const ScopedTuning tile(*ctx_, "attn_split_tile=16");
  for (const char* heads : {"2", "3"}) {
    SCOPED_TRACE(std::string("heads ") + heads);
    const ScopedTuning h(*ctx_, std::string("attn_split_heads=") + heads);
    check_prep(*ctx_, {INFER_KV_EXACT, 16, 8, 256, 0, 700, 639, false});
    check_prep(*ctx_, {INFER_KV_TIERED, 8, 1, 256, 0, 20, 6, false});
    check_prep(*ctx_, {INFER_KV_SLIDING, 8, 1, 256, 512, 512, 900, true});
  }
}

// With attn_prep off, prep_attend records qkv_prep and then the attention, two dispatches, and
// leaves what qkv_prep and attend called one by one leave.
TEST_F(AttentionTest, PrepAttendApartMatchesQkvPrepThenAttend) {
  const ScopedTuning apart(*ctx_, "attn_prep=off");
  check_prep(*ctx_, {INFER_KV_EXACT, 8, 1, 256, 0, 40, 20, false}, /*fused_ops=*/false);
  check_prep(*ctx_, {INFER_KV_TIERED, 8, 1, 256, 0, 20, 6, false}, /*fused_ops=*/false);
  check_prep(*ctx_, {INFER_KV_SLIDING, 8, 1, 256, 512, 512, 900, true}, /*fused_ops=*/false);
}

}  // namespace
}  // namespace infer::gpu
