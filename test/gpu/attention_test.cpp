// GPU attend vs the CPU reference (model/ops/attention), exact KV mode: full and sliding rings
// with GQA, d 16/256/512, decode at many positions (wrapped rings too) and prefill chunks at
// pos0 > 0, split-K (merged by the last split) and direct paths; decode both in one dispatch
// (split over keys: the default up to d 256, attn_split=1 everywhere) and in two passes
// (also with its knobs forcing every loop and merge). The KV ring's modes:
// attention_ring_test.cpp; token-by-token decode with qkv_prep: attention_steps_test.cpp.
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

// Tests of one decode path at every head dim: the tuning's attn_split (read when the ops are
// created) is `value` while they run, so both paths stay tested whatever the default picks.
class DecodePathTest : public GpuTest {
 protected:
  explicit DecodePathTest(const char* value) : value_(value) {}
  void SetUp() override {
    GpuTest::SetUp();
    if (ctx_ != nullptr) tuning_.emplace(*ctx_, std::string("attn_split=") + value_);
  }
  void TearDown() override {
    tuning_.reset();
    GpuTest::TearDown();
  }

 private:
  const char* value_;
  std::optional<ScopedTuning> tuning_;
};

// The one-dispatch decode (attend_split.comp; the default up to d 256).
class SplitDecode : public DecodePathTest {
 protected:
  SplitDecode() : DecodePathTest("on") {}
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
  // Appended piece by piece: GCC 12's -Wrestrict misfires on a chain of operator+ at -O3.
  std::string name = "Q" + std::to_string(c.n_q);
  name += "Kv" + std::to_string(c.n_kv);
  name += "D" + std::to_string(c.d);
  name += c.window ? "W" + std::to_string(c.window) : std::string("Full");
  name += "Slots" + std::to_string(c.slots);
  name += "T" + std::to_string(c.T);
  name += "Pos" + std::to_string(c.pos0);
  if (c.q_scale > 1.0f) name += "Peaked";
  return name;
}

INSTANTIATE_TEST_SUITE_P(Attention, GpuAttend, ::testing::ValuesIn(kAttendCases),
                         [](const auto& info) { return attend_name(info.param); });

// The two-pass decode (the default above d 256; attn_split=0 asks for it everywhere) on
// every decode case above.
class TwoPassDecode : public DecodePathTest {
 protected:
  TwoPassDecode() : DecodePathTest("off") {}
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

// The one-dispatch decode with several query heads a workgroup (attn_split_heads: 8,
// capped by each case's GQA group, and 3, which leaves a partial last head group) and splits of
// two tiles or more (attn_split_keys=64: the online softmax across tiles), on every decode
// case; the default takes one head and one tile a split. Tiles of 16 and 8 keys up to d 256
// (attn_split_tile; 32 by default) with them.
TEST_F(SplitDecode, HeadGroupsAndTilesKeepItRight) {
  for (const char* heads : {"8", "3"}) {
    const ScopedTuning h(*ctx_, std::string("attn_split_heads=") + heads);
    const ScopedTuning keys(*ctx_, "attn_split_keys=64");
    const ScopedTuning tile(*ctx_, std::string("attn_split_tile=") + (heads[0] == '8' ? "16" : "8"));
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
  const ScopedTuning keys(*ctx_, "attn_keys_per_subgroup=3");
  const ScopedTuning groups(*ctx_, "attn_score_groups=5");
  const ScopedTuning dims(*ctx_, "attn_pv_dims=24");
  const ScopedTuning inv(*ctx_, "attn_pv_invocations=100");  // 96: four key lanes
  const ScopedTuning unroll(*ctx_, "attn_pv_unroll=3");
  const ScopedTuning min_keys(*ctx_, "attn_pv_keys=20");
  const ScopedTuning splits(*ctx_, "attn_pv_splits=7");
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

}  // namespace
}  // namespace infer::gpu
