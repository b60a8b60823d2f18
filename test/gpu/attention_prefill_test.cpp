// GPU prefill attention (T > 1) vs the CPU reference, aimed at the tiled kernel's edges
// (shaders/attend_tiled.comp): chunks that are not a whole number of row blocks, d 16/200/256/512,
// windows smaller than the chunk, GQA 8:1, 3:1 and 2:1, the exact mode and both KV ring modes,
// chunks at nonzero positions, direct and split-K (merged) workgroups, peaked softmax; then the
// same cases, in shares, with other shapes from the knobs and through the old kernel
// (attn_prefill=old).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gpu/ops/attention.h"
#include "model/ops/rope.h"
#include "shaders/attention.h"
#include "test/gpu/attention_test_util.h"
#include "test/gpu/gpu_test_env.h"

namespace infer::gpu {
namespace {

struct PrefillCase {
  uint32_t mode;  // INFER_KV_*
  uint32_t n_q, n_kv, d;
  uint32_t window;  // 0: full
  uint32_t slots;   // ring rows (tiered: without the T staging rows)
  uint32_t T;
  uint32_t pos0;  // exact and sliding: the chunk's position; tiered: n_keys
  float q_scale = 1.0f;  // > 1: peaked softmax (scores of tens)
};

void PrintTo(const PrefillCase& c, std::ostream* os) {
  *os << "mode " << c.mode << " n_q " << c.n_q << " n_kv " << c.n_kv << " d " << c.d
      << " window " << c.window << " slots " << c.slots << " T " << c.T << " pos0 " << c.pos0
      << " q_scale " << c.q_scale;
}

std::string prefill_name(const PrefillCase& c) {
  CaseName name(c.mode);
  name.add("Q", c.n_q).add("Kv", c.n_kv).add("D", c.d);
  if (c.window) name.add("W", c.window);
  name.add("Slots", c.slots).add("T", c.T).add("Pos", c.pos0);
  if (c.q_scale > 1.0f) name.text += "Peaked";
  return name.text;
}

// The whole binary may run with attn_prefill=old (the old kernel through these cases).
bool tiled_by_default() {
  const char* kernel = std::getenv("attn_prefill");
  return kernel == nullptr || std::string(kernel) != "old";
}

// Cache positions of the keys before the chunk: exact, its position; tiered, n_keys; sliding,
// n_s = min(pos0, W - 1).
uint32_t keys_before(const PrefillCase& c) {
  return c.mode == INFER_KV_SLIDING ? std::min(c.pos0, c.window - 1) : c.pos0;
}

AttentionDims dims_of(const PrefillCase& c) {
  AttentionDims dims{c.T, c.n_q, c.n_kv, c.d, c.slots, c.window};
  dims.mode = c.mode;
  return dims;
}

// The chunk attended with keys at cache positions 0 .. n + T - 1 in a NaN-filled ring at the
// mode's slots (exact: s % slots, the last `slots` positions only; tiered: shuffled slots, the
// chunk in staging rows; sliding: (s + pos0 - n) % slots); ring modes store K unrotated and the
// CPU sees it rotated at the cache position. The CPU reference sees every position.
// `tiled_kernel`: whether the ops (knobs from the environment) take the tiled kernel.
void check_prefill(const VulkanContext& ctx, const PrefillCase& c, uint32_t seed,
                   bool tiled_kernel = tiled_by_default()) {
  SCOPED_TRACE(prefill_name(c));
  const bool tiered = c.mode == INFER_KV_TIERED, exact = c.mode == INFER_KV_EXACT;
  const uint32_t n = keys_before(c), n_pos = n + c.T;
  const size_t row = size_t(c.n_kv) * c.d, q_n = size_t(c.T) * c.n_q * c.d;
  const uint32_t rows = c.slots + (tiered ? c.T : 0);
  const Stream raw = random_stream(n_pos, c.n_kv, c.d, seed);

  std::vector<uint32_t> key_slots(c.slots);
  std::iota(key_slots.begin(), key_slots.end(), 0u);
  std::shuffle(key_slots.begin(), key_slots.end(), std::mt19937(seed));
  key_slots.resize(tiered ? n : 0);
  auto slot_of = [&](uint32_t s) {
    if (tiered) return s < n ? key_slots[s] : c.slots + (s - n);
    return exact ? s % c.slots : (s + c.pos0 - n) % c.slots;
  };
  std::vector<float> k_ring(size_t(rows) * row, NAN), v_ring(size_t(rows) * row, NAN);
  for (uint32_t s = exact && n_pos > c.slots ? n_pos - c.slots : 0; s < n_pos; ++s) {
    std::copy_n(raw.k.begin() + s * row, row, k_ring.begin() + slot_of(s) * row);
    std::copy_n(raw.v.begin() + s * row, row, v_ring.begin() + slot_of(s) * row);
  }
  const std::vector<float> inv_freq = inv_freq_for(c.d, c.window == 0);
  Stream keys = raw;
  if (!exact) {
    std::vector<float> cos(c.d / 2), sin(c.d / 2);
    for (uint32_t s = 0; s < n_pos; ++s) {
      rope_tables(inv_freq.data(), c.d / 2, s, 1, cos.data(), sin.data());
      rope_apply(keys.k.data() + s * row, 1, c.n_kv, c.d, cos.data(), sin.data());
    }
  }
  const float qs = c.q_scale * 3.0f / std::sqrt(float(c.d));
  const std::vector<float> q = random_vector(q_n, seed + 7, -qs, qs);

  auto ops = make_ops(ctx, kMaxChunk, c.n_q, c.d, std::max(n_pos, c.slots + 1));
  StepBuffer step(ctx, std::max<uint32_t>(n, 1));
  step.set_ring(c.pos0, c.T, tiered ? n : 0, c.mode == INFER_KV_SLIDING ? n : 0, key_slots);
  Buffer kc = device_buffer(ctx, k_ring, "k_cache"), vc = device_buffer(ctx, v_ring, "v_cache");
  Buffer qb = device_buffer(ctx, q, "q"), fb = device_buffer(ctx, inv_freq, "inv_freq");
  Buffer ob = device_buffer(ctx, std::vector<float>(q_n, NAN), "out");
  const AttentionDims dims = dims_of(c);
  EXPECT_EQ(ops->tiled_prefill(dims), tiled_kernel);
  auto rec = Recorder::create(ctx);
  ASSERT_TRUE(rec.ok()) << rec.error().message;
  ASSERT_TRUE((*rec)->begin().ok());
  auto r = ops->attend(**rec, {&step.buffer}, dims, {&qb}, {&kc}, {&vc}, {&ob}, {&fb});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*rec)->dispatch_count(), 1u);
  ASSERT_TRUE((*rec)->submit_and_wait().ok());
  AttentionDims ref = dims;
  ref.mode = INFER_KV_EXACT;
  expect_close(download_floats(ctx, ob, q_n), reference_attention(keys, q, ref, n), kAttendTol,
               "out");
}

// Slots: full layers every position (>= pos0 + T), sliding ones W - 1 + T, so rings wrap.
// Default shapes: 64 rows and 64-key tiles at d <= 256 (E2B: 8 tokens x 8 heads, 12B: 32 x 2),
// 32 rows and 128-key tiles at d = 512; 128 keys a split at least.
const PrefillCase kPrefillCases[] = {
    // E2B-like, 8:1: T = 37 and 63 are no whole number of 8-token blocks; 1 to 3 tiles, direct
    {INFER_KV_EXACT, 8, 1, 256, 0, 100, 37, 0},
    {INFER_KV_EXACT, 8, 1, 256, 0, 200, 63, 101},
    // d = 512 (4 tokens a block, 128-key tiles), at a nonzero position; long: splits merge
    {INFER_KV_EXACT, 8, 1, 512, 0, 120, 45, 70},
    {INFER_KV_EXACT, 8, 1, 512, 0, 1100, 30, 1000},
    // windows smaller than the chunk (rows of a block see different key ranges), wrapped rings
    {INFER_KV_EXACT, 8, 1, 256, 16, 16 - 1 + 60, 60, 0},
    {INFER_KV_EXACT, 8, 1, 512, 21, 21 - 1 + 64, 64, 333},
    // 12B-like, 2:1 (32 tokens a block): one partial block, a window, splits
    {INFER_KV_EXACT, 16, 8, 256, 0, 80, 50, 30},
    {INFER_KV_EXACT, 16, 8, 256, 24, 24 - 1 + 50, 50, 500},
    {INFER_KV_EXACT, 4, 2, 256, 0, 700, 40, 650},
    // 3:1 (a block of 21 tokens x 3 heads leaves a dead row), d not a multiple of the slice or
    // of the output dims; tiny d
    {INFER_KV_EXACT, 3, 1, 200, 0, 160, 33, 120},
    {INFER_KV_EXACT, 16, 2, 16, 0, 64, 7, 50},
    // peaked softmax through the split merge
    {INFER_KV_EXACT, 8, 1, 256, 0, 600, 20, 570, 12.0f},
    // KV ring modes: tiered (shuffled slots, the chunk in staging), sliding (wrapped)
    {INFER_KV_TIERED, 8, 1, 512, 0, 200, 40, 150},
    {INFER_KV_TIERED, 8, 1, 256, 0, 800, 64, 700},
    {INFER_KV_TIERED, 16, 8, 256, 0, 40, 64, 0},
    {INFER_KV_SLIDING, 16, 8, 256, 32, 32 - 1 + 50, 50, 300},
    {INFER_KV_SLIDING, 8, 1, 512, 100, 100 - 1 + 64, 64, 40},
};

class GpuAttendPrefill : public GpuTest, public ::testing::WithParamInterface<PrefillCase> {};

TEST_P(GpuAttendPrefill, MatchesCpuReference) { check_prefill(*ctx_, GetParam(), 41); }

INSTANTIATE_TEST_SUITE_P(Attention, GpuAttendPrefill, ::testing::ValuesIn(kPrefillCases),
                         [](const auto& info) { return prefill_name(info.param); });

// The cases above take the tiled kernel, some workgroups directly and some through split-K.
TEST_F(AttentionTest, PrefillCasesTakeTheTiledKernelDirectAndSplit) {
  bool direct = false, split = false;
  for (const PrefillCase& c : kPrefillCases) {
    SCOPED_TRACE(prefill_name(c));
    auto ops = make_ops(*ctx_, kMaxChunk, c.n_q, c.d, keys_before(c) + c.T + c.slots);
    const AttentionDims dims = dims_of(c);
    EXPECT_EQ(ops->tiled_prefill(dims), tiled_by_default());
    const uint32_t keys = keys_before(c) + c.T;
    const uint32_t seen = c.window > 0 ? std::min(keys, c.window + c.T) : keys;
    direct = direct || seen <= ops->min_keys_per_split(dims);
    split = split || (ops->splits(dims) > 1 && seen > ops->min_keys_per_split(dims));
  }
  EXPECT_TRUE(direct);
  EXPECT_TRUE(split);
}

// Other shapes of the tiled kernel (knobs read at create): 32 rows of 64-key tiles (128
// invocations, 4 x 32 output floats at d = 512), 16 rows of 128 keys, 128-key tiles at
// d = 256, one-tile splits, and a 40 KB budget that leaves smaller V sub-tiles.
TEST_F(AttentionTest, PrefillTiledShapesFromKnobsMatch) {
  const std::vector<const char*> knob_sets = {
      "attn_prefill_rows=32,attn_prefill_tile=64",
      "attn_prefill_rows=16,attn_prefill_tile=128",
      "attn_prefill_rows=32,attn_prefill_keys=1",
      "attn_prefill_shared=40960",
  };
  // Knob set k takes cases k, k + 4, ... (a quarter each, rotating), so every case meets one
  // of the other shapes, and each set sees d 256 and 512 and two KV modes at least. The whole
  // cross product was ~2 minutes of CI's lavapipe time; alternating halves, 22 s.
  const size_t n_cases = sizeof(kPrefillCases) / sizeof(kPrefillCases[0]);
  for (size_t k = 0; k < knob_sets.size(); ++k) {
    const ScopedTuning knobs(*ctx_, knob_sets[k]);
    SCOPED_TRACE(knob_sets[k]);
    for (size_t i = k; i < n_cases; i += knob_sets.size()) {
      check_prefill(*ctx_, kPrefillCases[i], 43);
    }
  }
  // 8 rows: 16 heads a KV head in two head groups of one token each.
  const ScopedTuning rows(*ctx_, "attn_prefill_rows=8");
  const ScopedTuning tile(*ctx_, "attn_prefill_tile=128");
  check_prefill(*ctx_, {INFER_KV_EXACT, 16, 1, 256, 0, 300, 21, 200}, 47);
  check_prefill(*ctx_, {INFER_KV_SLIDING, 16, 1, 512, 40, 40 - 1 + 33, 33, 100}, 47);
}

// A budget below the smallest tiled shape falls back to attend.comp.
TEST_F(AttentionTest, PrefillSmallSharedBudgetFallsBackToTheOldKernel) {
  const ScopedTuning env(*ctx_, "attn_prefill_shared=8192");
  check_prefill(*ctx_, kPrefillCases[0], 59, false);
}

// attn_prefill=old: the cases through attend.comp, as before the tiled kernel, but for
// the two longest rings (1030 and 764 keys: about half of this test's time on lavapipe, where
// the old kernel takes twice the tiled one's). attend.comp splits every 64 keys, so the rest
// still take it direct and through the split merge in every KV mode, up to 690 keys (checked).
TEST_F(AttentionTest, PrefillOldKernelOnRequestMatches) {
  const ScopedTuning env(*ctx_, "attn_prefill=old");
  constexpr uint32_t kMaxKeys = 700;
  bool direct = false;
  std::set<uint32_t> split_modes;
  for (const PrefillCase& c : kPrefillCases) {
    const uint32_t n_pos = keys_before(c) + c.T;
    if (n_pos > kMaxKeys) continue;
    check_prefill(*ctx_, c, 53, false);
    // The grid check_prefill's ops dispatched (their positions size the split scratch).
    const auto ops = make_ops(*ctx_, kMaxChunk, c.n_q, c.d, std::max(n_pos, c.slots + 1));
    const uint32_t splits = ops->splits(dims_of(c));
    direct = direct || splits == 1;
    if (splits > 1) split_modes.insert(c.mode);
  }
  EXPECT_TRUE(direct);
  EXPECT_EQ(split_modes, (std::set<uint32_t>{INFER_KV_EXACT, INFER_KV_TIERED, INFER_KV_SLIDING}));
}

}  // namespace
}  // namespace infer::gpu
