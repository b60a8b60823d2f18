// GPU attend vs the CPU reference (model/ops/attention), exact KV mode: full and sliding rings
// with GQA, d 16/256/512, decode at many positions (wrapped rings too) and prefill chunks at
// pos0 > 0, split-K (merged by the last split) and direct paths; decode both in one dispatch
// (split over keys: the default up to d 256, INFER_ATTN_SPLIT=1 everywhere) and in two passes
// (also with its knobs forcing every loop and merge). The KV ring's modes:
// attention_ring_test.cpp.
#include "gpu/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
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

struct AttendCase {
  uint32_t n_q, n_kv, d, window, slots, T, pos0;
  float q_scale = 1.0f;  // > 1: peaked softmax (scores of tens)
};

void PrintTo(const AttendCase& c, std::ostream* os) {
  *os << "n_q " << c.n_q << " n_kv " << c.n_kv << " d " << c.d << " window " << c.window
      << " slots " << c.slots << " T " << c.T << " pos0 " << c.pos0 << " q_scale " << c.q_scale;
}

// The ring after positions [0, end) were written: row p % slots holds the last p written;
// rows never written are NaN, so reading one poisons the output.
void fill_ring(const std::vector<float>& all, size_t row, uint32_t slots, uint32_t end,
               std::vector<float>* ring) {
  ring->assign(slots * row, NAN);
  const uint32_t begin = end > slots ? end - slots : 0;
  for (uint32_t p = begin; p < end; ++p) {
    std::copy_n(all.begin() + p * row, row, ring->begin() + (p % slots) * row);
  }
}

class AttendRig {
 public:
  AttendRig(const VulkanContext& ctx, const AttendCase& c, uint32_t n_pos)
      : ctx_(ctx), c_(c), step_(ctx) {
    ops_ = make_ops(ctx, kMaxChunk, c.n_q, c.d, n_pos);
    stream_ = random_stream(n_pos, c.n_kv, c.d, c.d * 7 + c.slots);
    dims_ = AttentionDims{c.T, c.n_q, c.n_kv, c.d, c.slots, c.window};
    const size_t ring_n = size_t(c.slots) * c.n_kv * c.d, q_n = size_t(c.T) * c.n_q * c.d;
    kc_ = device_buffer(ctx, std::vector<float>(ring_n, 0.0f), "k_cache");
    vc_ = device_buffer(ctx, std::vector<float>(ring_n, 0.0f), "v_cache");
    qb_ = device_buffer(ctx, std::vector<float>(q_n, 0.0f), "q");
    ob_ = device_buffer(ctx, std::vector<float>(q_n, NAN), "out");
  }

  // Attends the chunk at pos0 with the ring as after writing [0, pos0 + T); compares with the
  // CPU over the whole stream.
  void check(uint32_t pos0, uint32_t seed) {
    SCOPED_TRACE("pos0 " + std::to_string(pos0));
    const size_t row = size_t(c_.n_kv) * c_.d, q_n = size_t(c_.T) * c_.n_q * c_.d;
    // q scaled so scores q·k have a spread of a few units (x q_scale).
    const float qs = c_.q_scale * 3.0f / std::sqrt(float(c_.d));
    const std::vector<float> q = random_vector(q_n, seed, -qs, qs);
    std::vector<float> ring;
    fill_ring(stream_.k, row, c_.slots, pos0 + c_.T, &ring);
    ASSERT_TRUE(upload(ctx_, kc_, 0, ring.data(), ring.size() * sizeof(float)).ok());
    fill_ring(stream_.v, row, c_.slots, pos0 + c_.T, &ring);
    ASSERT_TRUE(upload(ctx_, vc_, 0, ring.data(), ring.size() * sizeof(float)).ok());
    ASSERT_TRUE(upload(ctx_, qb_, 0, q.data(), q_n * sizeof(float)).ok());
    step_.set(pos0, c_.T);

    auto rec = Recorder::create(ctx_);
    ASSERT_TRUE(rec.ok()) << rec.error().message;
    ASSERT_TRUE((*rec)->begin().ok());
    auto r = ops_->attend(**rec, {&step_.buffer}, dims_, {&qb_}, {&kc_}, {&vc_}, {&ob_});
    ASSERT_TRUE(r.ok()) << r.error().message;
    // One dispatch, split or not (the last split merges); the two-pass decode: scores, then
    // softmax · V.
    const bool two_pass = c_.T == 1 && ops_->decode_splits(dims_) == 0;
    EXPECT_EQ((*rec)->dispatch_count(), two_pass ? 2u : 1u);
    ASSERT_TRUE((*rec)->submit_and_wait().ok());
    expect_close(download_floats(ctx_, ob_, q_n), reference_attention(stream_, q, dims_, pos0),
                 c_.T > 1 ? kTiledAttendTol : kAttendTol, "out");
  }

  const AttentionOps& ops() const { return *ops_; }
  const AttentionDims& dims() const { return dims_; }

 private:
  const VulkanContext& ctx_;
  AttendCase c_;
  StepBuffer step_;
  std::unique_ptr<AttentionOps> ops_;
  Stream stream_;
  AttentionDims dims_;
  Buffer kc_, vc_, qb_, ob_;
};

// Tests of one decode path at every head dim: INFER_ATTN_SPLIT (read when the ops are created)
// is `value` while they run, so both paths stay tested whatever the default picks.
class DecodePathTest : public GpuTest {
 protected:
  explicit DecodePathTest(const char* value) : value_(value) {}
  void SetUp() override {
    setenv("INFER_ATTN_SPLIT", value_, 1);
    GpuTest::SetUp();
  }
  void TearDown() override {
    unsetenv("INFER_ATTN_SPLIT");
    GpuTest::TearDown();
  }

 private:
  const char* value_;
};

// The one-dispatch decode (attend_split.comp; the default up to d 256).
class SplitDecode : public DecodePathTest {
 protected:
  SplitDecode() : DecodePathTest("1") {}
};

class GpuAttend : public SplitDecode, public ::testing::WithParamInterface<AttendCase> {};

// Each case at a few positions: the first chunk, positions inside and past the ring (sliding
// rings wrap), and pos0 given.
TEST_P(GpuAttend, MatchesCpuReference) {
  const AttendCase c = GetParam();
  AttendRig rig(*ctx_, c, c.pos0 + c.T);
  for (uint32_t pos0 : {0u, c.pos0 / 3, c.pos0}) rig.check(pos0, pos0 + 11);
}

// Slots: full layers hold every position (>= pos0 + T); sliding ones W - 1 + T (the minimum
// the forward pass may size, GEMMA4_TEXT.md §5), smaller than pos0 so the ring has wrapped.
// Splits: rings of <= 64 keys take the direct path, longer ones split and merge.
const AttendCase kAttendCases[] = {
    // decode, full
    {4, 2, 16, 0, 200, 1, 150},
    {8, 2, 256, 0, 700, 1, 650},
    {8, 1, 512, 0, 1100, 1, 1000},
    {4, 4, 8, 0, 40, 1, 39},    // no GQA, direct
    {16, 1, 16, 0, 300, 1, 250},  // 16 heads a KV head: more than one head group
    {8, 2, 256, 0, 16, 1, 6},       // 1, 3 and 7 keys: one split, partial tile
    {8, 1, 512, 0, 700, 1, 640},    // E2B's full layer at the profiled position
    {2, 1, 512, 0, 3100, 1, 3050},  // 3051 keys: the most splits (> 64 tiles), GQA 2
    {2, 1, 256, 0, 4400, 1, 4300},  // 4301 keys: more than 64 splits of 64 keys
    {16, 8, 256, 0, 3300, 1, 3201}, // 12B-like heads: 8 KV heads, GQA 2
    {3, 1, 200, 0, 400, 1, 333},    // d not a multiple of the workgroup: a partial dim slice
    // decode, sliding (wrapped rings)
    {8, 1, 256, 32, 32, 1, 500},
    {8, 4, 16, 5, 6, 1, 77},
    {8, 2, 512, 100, 100, 1, 333},
    {8, 1, 256, 512, 512, 1, 2000},  // E2B's sliding layer: the window split 16 ways
    // prefill chunks at pos0 > 0
    {4, 1, 16, 16, 22, 7, 45},
    {8, 2, 256, 0, 256, 64, 130},
    {8, 1, 512, 48, 111, 64, 200},
    {2, 1, 512, 0, 16, 7, 3},  // direct path for T > 1
    {16, 2, 16, 0, 64, 7, 50},
    {4, 1, 256, 20, 26, 7, 90},
    // peaked softmax: max subtraction and the merge of splits with very different maxima
    {8, 2, 256, 0, 600, 1, 580, 12.0f},
    {8, 1, 256, 40, 103, 64, 300, 12.0f},
};

std::string attend_name(const AttendCase& c) {
  return "Q" + std::to_string(c.n_q) + "Kv" + std::to_string(c.n_kv) + "D" +
         std::to_string(c.d) + (c.window ? "W" + std::to_string(c.window) : "Full") + "Slots" +
         std::to_string(c.slots) + "T" + std::to_string(c.T) + "Pos" + std::to_string(c.pos0) +
         (c.q_scale > 1.0f ? "Peaked" : "");
}

INSTANTIATE_TEST_SUITE_P(Attention, GpuAttend, ::testing::ValuesIn(kAttendCases),
                         [](const auto& info) { return attend_name(info.param); });

// The two-pass decode (the default above d 256; INFER_ATTN_SPLIT=0 asks for it everywhere) on
// every decode case above.
class TwoPassDecode : public DecodePathTest {
 protected:
  TwoPassDecode() : DecodePathTest("0") {}
};

class GpuAttendTwoPass : public TwoPassDecode, public ::testing::WithParamInterface<AttendCase> {};

TEST_P(GpuAttendTwoPass, MatchesCpuReference) {
  const AttendCase c = GetParam();
  AttendRig rig(*ctx_, c, c.pos0 + c.T);
  ASSERT_EQ(rig.ops().decode_splits(rig.dims()), 0u);
  for (uint32_t pos0 : {0u, c.pos0 / 3, c.pos0}) rig.check(pos0, pos0 + 11);
}

std::vector<AttendCase> decode_cases() {
  std::vector<AttendCase> v;
  for (const AttendCase& c : kAttendCases) {
    if (c.T == 1) v.push_back(c);
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Attention, GpuAttendTwoPass, ::testing::ValuesIn(decode_cases()),
                         [](const auto& info) { return attend_name(info.param); });

// The one-dispatch decode with several query heads a workgroup (INFER_ATTN_SPLIT_HEADS: 8,
// capped by each case's GQA group, and 3, which leaves a partial last head group) and splits of
// two tiles or more (INFER_ATTN_SPLIT_KEYS=64: the online softmax across tiles), on every decode
// case; the default takes one head and one tile a split. Tiles of 16 and 8 keys up to d 256
// (INFER_ATTN_SPLIT_TILE; 32 by default) with them.
TEST_F(SplitDecode, HeadGroupsAndTilesKeepItRight) {
  for (const char* heads : {"8", "3"}) {
    const ScopedEnv h("INFER_ATTN_SPLIT_HEADS", heads);
    const ScopedEnv keys("INFER_ATTN_SPLIT_KEYS", "64");
    const ScopedEnv tile("INFER_ATTN_SPLIT_TILE", heads[0] == '8' ? "16" : "8");
    for (const AttendCase& c : decode_cases()) {
      SCOPED_TRACE(attend_name(c) + " heads " + heads);
      AttendRig rig(*ctx_, c, c.pos0 + 1);
      ASSERT_GT(rig.ops().decode_splits(rig.dims()), 0u);
      for (uint32_t pos0 : {0u, c.pos0 / 3, c.pos0}) rig.check(pos0, pos0 + 3);
    }
  }
}

// Defaults put 640 keys in one pass-1 round a workgroup and a few pass-2 ranges; the knobs
// (read at create) here force several pass-1 rounds and blocks per workgroup, pass-2 rounds
// with a ragged last one, ranges that merge, odd dim chunks (past d in the last) and unpinned
// sizes, on every decode case.
TEST_F(TwoPassDecode, KnobsKeepItRight) {
  const ScopedEnv keys("INFER_ATTN_KEYS_PER_SUBGROUP", "3");
  const ScopedEnv groups("INFER_ATTN_SCORES_GROUPS", "5");
  const ScopedEnv dims("INFER_ATTN_PV_DIMS", "24");
  const ScopedEnv inv("INFER_ATTN_PV_INVOCATIONS", "100");  // 96: four key lanes
  const ScopedEnv unroll("INFER_ATTN_PV_UNROLL", "3");
  const ScopedEnv min_keys("INFER_ATTN_PV_KEYS", "20");
  const ScopedEnv splits("INFER_ATTN_PV_SPLITS", "7");
  bool rounds = false, merges = false;
  for (const AttendCase& c : decode_cases()) {
    SCOPED_TRACE(attend_name(c));
    AttendRig rig(*ctx_, c, c.pos0 + 1);
    const AttentionOps::DecodeGrid g = rig.ops().decode_grid(rig.dims());
    EXPECT_LE(g.score_groups, 5u);
    EXPECT_LE(g.pv_splits, 7u);
    EXPECT_EQ(g.pv_min_keys, 20u);
    const uint32_t keys = c.window > 0 ? std::min(c.window, c.pos0 + 1) : c.pos0 + 1;
    rounds = rounds || keys > g.score_groups * g.score_block;
    merges = merges || keys > g.pv_min_keys;
    for (uint32_t pos0 : {0u, c.pos0 / 3, c.pos0}) rig.check(pos0, pos0 + 3);
  }
  EXPECT_TRUE(rounds);  // some pass-1 workgroup loops over more than one block
  EXPECT_TRUE(merges);  // some pass-2 ranges merge
}

// The cases above exercise every path of attend(): for decode and prefill alike, one split
// writing out and several whose last merges. Splits are chosen at run time from the keys the
// rows see (>= min_keys_per_split each, within the grid's splits()); the case's last token
// sees the most, its first (pos0 0) one key.
TEST_F(SplitDecode, AttendCasesCoverEveryPath) {
  bool decode_direct = false, decode_split = false, decode_max = false, direct = false,
       split_prefill = false;
  for (const AttendCase& c : kAttendCases) {
    auto ops = make_ops(*ctx_, kMaxChunk, c.n_q, c.d, c.pos0 + c.T);
    if (c.T == 1) {
      const uint32_t grid = ops->decode_splits({c.T, c.n_q, c.n_kv, c.d, c.slots, c.window});
      ASSERT_GT(grid, 0u) << "the split decode is not tested";
      const uint32_t keys = c.window > 0 ? std::min(c.window, c.pos0 + 1) : c.pos0 + 1;
      decode_direct = true;  // pos0 0: one key
      decode_split = decode_split || keys > ops->decode_min_keys_per_split();
      decode_max = decode_max || keys > grid * ops->decode_min_keys_per_split();
      continue;
    }
    const AttentionDims dims{c.T, c.n_q, c.n_kv, c.d, c.slots, c.window};
    const uint32_t grid = ops->splits(dims);
    const uint32_t keys = c.window > 0 ? std::min(c.window, c.pos0 + c.T) : c.pos0 + c.T;
    const bool splits = grid > 1 && keys > ops->min_keys_per_split(dims);
    direct = direct || !splits;
    split_prefill = split_prefill || splits;
  }
  EXPECT_TRUE(decode_direct);
  EXPECT_TRUE(decode_split);
  EXPECT_TRUE(decode_max);  // more keys than the grid's splits take at the minimum
  EXPECT_TRUE(direct);
  EXPECT_TRUE(split_prefill);
}


// ---------------------------------------------------------------------------------------------
// decode: qkv_prep + attend, the same commands for every token, only the step buffer changes

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
TEST_F(SplitDecode, DecodeStepsMatchCpuAtEveryPosition) {
  check_decode(*ctx_, {8, 1, 256, 24, 24, 90});
  check_decode(*ctx_, {4, 2, 16, 0, 150, 150});
  check_decode(*ctx_, {8, 1, 512, 0, 80, 80});
}

// The same with qkv_prep folded into the split decode (AttentionOps::prep_attend): one dispatch
// a token; the d-512 case goes the two-pass way (three dispatches) unless INFER_ATTN_SPLIT=1,
// as here, asks for the split at every d.
TEST_F(SplitDecode, FusedPrepDecodeStepsMatchCpuAtEveryPosition) {
  check_decode(*ctx_, {8, 1, 256, 24, 24, 90}, true);
  check_decode(*ctx_, {4, 2, 16, 0, 150, 150}, true);
  check_decode(*ctx_, {8, 1, 512, 0, 80, 80}, true);
  check_decode(*ctx_, {16, 8, 256, 0, 70, 70}, true);  // 12B's heads: two head groups a KV head
}

// The same token by token through the two-pass decode (INFER_ATTN_SPLIT=0 asks for it at every
// d): two dispatches (AttendRig::check counts them).
TEST_F(AttentionTest, TwoPassDecodeStepsMatchCpuAtEveryPosition) {
  const ScopedEnv env("INFER_ATTN_SPLIT", "0");
  check_decode(*ctx_, {8, 1, 256, 24, 24, 90});
  check_decode(*ctx_, {4, 2, 16, 0, 150, 150});
  check_decode(*ctx_, {8, 1, 512, 0, 80, 80});
}

}  // namespace
}  // namespace infer::gpu
