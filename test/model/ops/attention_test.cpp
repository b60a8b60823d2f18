// Every attention kernel this CPU runs (avx512, generic) against attention_reference: full and
// sliding layers, GQA ratios 1/2/3/4/8/12 (tiles of 1-8 heads), d = 16/256/512, one token (keys
// split over 2 workers or not) and chunks at pos0 > 0, rings that wrap. And each kernel's exp
// against std::exp.
#include "model/ops/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "model/ops/attention_kernels.h"
#include "model/thread_pool.h"

namespace infer {
namespace {

// Distance in units in the last place between two finite floats of the same sign.
int64_t ulp_distance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, sizeof ia);
  std::memcpy(&ib, &b, sizeof ib);
  return std::abs(int64_t(ia) - int64_t(ib));
}

class AttentionExpTest : public testing::TestWithParam<int> {
 protected:
  const AttentionKernel& kernel() const { return attention_kernels()[size_t(GetParam())]; }
};

TEST_P(AttentionExpTest, MatchesStdExpWithin2Ulp) {
  // Every 2^-8 step-ish over the whole useful range, plus offsets that hit the Cody-Waite
  // boundaries n·ln2 ± ln2/2. Normal results: <= 2 ulp from the correctly rounded exp.
  // Subnormal results (x < −87.3): one rounding of a ~1 ulp value, so <= 2 subnormal steps.
  std::vector<float> x;
  for (float v = -103.5f; v < 88.7f; v += 0.00390625f * 1.0137f) x.push_back(v);
  for (int n = -149; n <= 127; ++n) {
    for (float f : {-0.5f, -0.49999f, 0.0f, 0.49999f, 0.5f}) {
      const float v = float((n + f) * 0.69314718055994530942);
      if (v > -103.5f && v < 88.7f) x.push_back(v);
    }
  }
  std::vector<float> y(x.size());
  kernel().exp(x.data(), y.data(), int64_t(x.size()));
  int64_t worst = 0;
  float worst_x = 0.0f;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = float(std::exp(double(x[i])));
    if (want < std::numeric_limits<float>::min()) {
      ASSERT_LE(std::abs(y[i] - want), 2 * std::numeric_limits<float>::denorm_min()) << x[i];
      continue;
    }
    const int64_t e = ulp_distance(y[i], want);
    if (e > worst) worst = e, worst_x = x[i];
  }
  EXPECT_LE(worst, 2) << "at x = " << worst_x;
}

TEST_P(AttentionExpTest, SpecialValuesAndRaggedLengths) {
  const float inf = std::numeric_limits<float>::infinity();
  const float in[] = {0.0f, -inf, -200.0f, -104.0f, 89.0f, inf, std::nanf("")};
  float out[7];
  kernel().exp(in, out, 7);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_LE(out[3], 2 * std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(out[4], inf);
  EXPECT_EQ(out[5], inf);
  EXPECT_TRUE(std::isnan(out[6]));
  // Tails: exactly n outputs written, in place.
  for (int n = 0; n <= 40; ++n) {
    std::vector<float> v(size_t(n) + 1, 1.0f);
    v[size_t(n)] = 42.0f;
    kernel().exp(v.data(), v.data(), n);
    for (int i = 0; i < n; ++i) EXPECT_NEAR(v[size_t(i)], 2.7182817f, 1e-6f) << n;
    EXPECT_EQ(v[size_t(n)], 42.0f) << n;
  }
}

std::string kernel_name(const testing::TestParamInfo<int>& info) {
  std::string k = attention_kernels()[size_t(info.param)].name;
  k[0] = char(std::toupper(k[0]));
  return k;
}

INSTANTIATE_TEST_SUITE_P(Kernels, AttentionExpTest,
                         testing::Range(0, int(attention_kernels().size())), kernel_name);

// One layer's K/V for positions [0, pos0 + T): a ring of `slots` rows holding [cache_begin, pos0)
// at pos % slots (unwritten rows NaN, so reading one poisons the output) and the chunk's rows.
struct Case {
  int64_t n_q, n_kv, d, window, slots, pos0, T;
};

struct Inputs {
  std::vector<float> q, ring_k, ring_v, chunk_k, chunk_v;
  AttentionShape shape;
  KvView kv;

  explicit Inputs(const Case& c, uint32_t seed) {
    std::mt19937 rng(seed);
    // Scores q·k with a spread of ~±15, so the max subtraction and rescaling matter.
    std::normal_distribution<float> qd(0.0f, 8.0f / std::sqrt(float(c.d)));
    std::uniform_real_distribution<float> kd(-1.0f, 1.0f);
    const int64_t row = c.n_kv * c.d, end = c.pos0 + c.T;
    std::vector<float> k(size_t(end * row)), v(size_t(end * row));
    for (float& x : k) x = kd(rng);
    for (float& x : v) x = kd(rng);
    q.resize(size_t(c.T * c.n_q * c.d));
    for (float& x : q) x = qd(rng);
    ring_k.assign(size_t(c.slots * row), NAN);
    ring_v.assign(size_t(c.slots * row), NAN);
    const int64_t begin = std::max<int64_t>(0, c.pos0 - c.slots);
    for (int64_t p = begin; p < c.pos0; ++p) {
      std::copy_n(k.begin() + p * row, row, ring_k.begin() + (p % c.slots) * row);
      std::copy_n(v.begin() + p * row, row, ring_v.begin() + (p % c.slots) * row);
    }
    chunk_k.assign(k.begin() + c.pos0 * row, k.end());
    chunk_v.assign(v.begin() + c.pos0 * row, v.end());
    shape = AttentionShape{c.T, c.pos0, c.n_q, c.n_kv, c.d, c.window};
    kv = KvView{ring_k.data(), ring_v.data(), c.slots, begin, chunk_k.data(), chunk_v.data()};
  }
};

struct Param {
  int kernel;
  int threads;
};

class AttentionKernelTest : public testing::TestWithParam<Param> {};

// Outputs are convex combinations of V rows in [-1, 1]. An f32 score of d terms with 16 partial
// sums is off by <= ~(d/16 + 16)·2^-24·Σ|q_j k_j| (< 1e-4 at d = 512 here, typically far less),
// which moves the output by about that much; exp (~1 ulp) and the f32 sums over <= 600 keys add
// ~1e-6. A wrong key, slot, window bound or merge gives errors of 1e-2 and more.
constexpr float kTolerance = 1e-4f;

void check_case(const Param& p, const Case& c, uint32_t seed) {
  SCOPED_TRACE(testing::Message() << "n_q " << c.n_q << " n_kv " << c.n_kv << " d " << c.d
                                  << " window " << c.window << " slots " << c.slots << " pos0 "
                                  << c.pos0 << " T " << c.T);
  const Inputs in(c, seed);
  std::vector<float> want(in.q.size()), got(in.q.size(), NAN);
  attention_reference(in.q.data(), in.shape, in.kv, want.data());
  ThreadPool pool(p.threads);
  std::vector<float> partial(size_t(p.threads * attention_partial_floats(c.n_q, c.d)), NAN);
  const AttentionScratch scratch{partial.data(), attention_partial_floats(c.n_q, c.d), p.threads};
  attention_with(attention_kernels()[size_t(p.kernel)], in.q.data(), in.shape, in.kv, got.data(),
                 scratch, pool);
  float worst = 0.0f;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << i;
    worst = std::max(worst, std::abs(got[i] - want[i]));
  }
  EXPECT_LE(worst, kTolerance);
}

TEST_P(AttentionKernelTest, MatchesReference) {
  uint32_t seed = 1;
  for (int64_t d : {16, 256, 512}) {
    for (auto [n_q, n_kv] :
         {std::pair<int64_t, int64_t>{2, 2}, {4, 2}, {6, 2}, {8, 2}, {8, 1}, {12, 1}}) {
      const Case cases[] = {
          // Sliding, W = 40, ring of W - 1 = 39 slots as in KvCache: decode and a chunk, both
          // with the ring wrapped; a chunk longer than the window; an early chunk, no wrap.
          {n_q, n_kv, d, 40, 39, 100, 1},
          {n_q, n_kv, d, 40, 39, 101, 7},
          {n_q, n_kv, d, 40, 39, 117, 50},
          {n_q, n_kv, d, 40, 39, 10, 5},
          // Full: one token over 300 keys (ragged blocks of 64, split over workers), a chunk at
          // pos0 > 0, and a ring shorter than the positions (wrapped, cache_begin > 0).
          {n_q, n_kv, d, 0, 400, 300, 1},
          {n_q, n_kv, d, 0, 400, 70, 9},
          {n_q, n_kv, d, 0, 50, 130, 3},
          {n_q, n_kv, d, 0, 50, 130, 1},
          // First token of a sequence: one key.
          {n_q, n_kv, d, 0, 50, 0, 1},
      };
      for (const Case& c : cases) check_case(GetParam(), c, seed++);
    }
  }
}

TEST_P(AttentionKernelTest, E2bDecodeShapes) {
  // 8 query heads on one KV head: a sliding layer (d 256, W 512, 511 cached keys in a ring of
  // 511 that has wrapped) and a full one (d 512, 1500 keys).
  check_case(GetParam(), {8, 1, 256, 512, 511, 1234, 1}, 7);
  check_case(GetParam(), {8, 1, 512, 0, 2048, 1499, 1}, 8);
}

std::string param_name(const testing::TestParamInfo<Param>& info) {
  std::string k = attention_kernels()[size_t(info.param.kernel)].name;
  k[0] = char(std::toupper(k[0]));
  return k + "Threads" + std::to_string(info.param.threads);
}

std::vector<Param> params() {
  std::vector<Param> v;
  for (int k = 0; k < int(attention_kernels().size()); ++k) {
    for (int threads : {1, 2}) v.push_back({k, threads});
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Kernels, AttentionKernelTest, testing::ValuesIn(params()), param_name);

TEST(AttentionTest, NoSplitWithoutScratchMatchesSplit) {
  // A scratch row too short for the partial states turns the key split off; same result.
  const Case c{8, 1, 256, 0, 600, 500, 1};
  const Inputs in(c, 3);
  ThreadPool pool(2);
  std::vector<float> partial(size_t(2 * attention_partial_floats(8, 256)));
  std::vector<float> split(in.q.size()), whole(in.q.size());
  attention(in.q.data(), in.shape, in.kv, split.data(),
            AttentionScratch{partial.data(), attention_partial_floats(8, 256), 2}, pool);
  attention(in.q.data(), in.shape, in.kv, whole.data(), AttentionScratch{partial.data(), 16, 2},
            pool);
  for (size_t i = 0; i < split.size(); ++i) EXPECT_NEAR(split[i], whole[i], 1e-5f) << i;
}

}  // namespace
}  // namespace infer
