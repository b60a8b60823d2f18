// The codec's nearest-centroid search (memory/srvq_nearest.h): the AVX2 path picks exactly the
// centroid the reference picks (so codes do not depend on the CPU), ties included, and the
// codec's codes are those the encoder gave before the fast path existed.
#include "memory/srvq_nearest.h"

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "memory/splitmix.h"
#include "memory/srvq.h"
#include "test/memory/kv_rows.h"

namespace infer::memory {
namespace {

struct Case {
  int k, d;
};

// cents_t [d, k] with a few exact duplicates (ties: both must take the first), norms [k], and x
// like a residual: near one centroid, or small.
struct Problem {
  std::vector<float> cents_t, norms, xs;
};

// Centroid j is copied to j + 3 for j = 2, 11, 20, ... (make_problem).
bool has_later_twin(int j, int k) { return j >= 2 && (j - 2) % 9 == 0 && j + 3 < k; }

Problem make_problem(int k, int d, int n_x, uint64_t seed) {
  SplitMix64 r{seed};
  Problem p;
  std::vector<float> c(size_t(k) * d);
  for (float& v : c) v = 0.3f * test::symmetric_uniform(r);
  for (int j = 2; j + 3 < k; j += 9)
    for (int t = 0; t < d; ++t) c[size_t(j + 3) * d + t] = c[size_t(j) * d + t];
  p.cents_t.resize(c.size());
  p.norms.assign(size_t(k), 0.0f);
  for (int j = 0; j < k; ++j)
    for (int t = 0; t < d; ++t) {
      p.cents_t[size_t(t) * k + j] = c[size_t(j) * d + t];
      p.norms[size_t(j)] += c[size_t(j) * d + t] * c[size_t(j) * d + t];
    }
  p.xs.resize(size_t(n_x) * d);
  for (int i = 0; i < n_x; ++i) {
    const size_t near = r.below(size_t(k));
    const float noise = i % 3 == 0 ? 0.0f : 0.05f * float(i % 7);
    for (int t = 0; t < d; ++t) {
      p.xs[size_t(i) * d + t] =
          (i % 5 == 4 ? 0.0f : c[near * d + t]) + noise * test::symmetric_uniform(r);
    }
  }
  return p;
}

TEST(SrvqNearest, Avx2PicksTheReferencesCentroid) {
#if defined(__x86_64__)
  ASSERT_TRUE(__builtin_cpu_supports("avx2")) << "this test checks the AVX2 path";
#endif
  int ties = 0;
  for (Case c : {Case{32, 8}, Case{32, 32}, Case{64, 16}, Case{128, 32}, Case{128, 7},
                 Case{256, 32}, Case{256, 64}}) {
    const Problem p = make_problem(c.k, c.d, 400, uint64_t(c.k * 1000 + c.d));
    for (int i = 0; i < 400; ++i) {
      const float* x = p.xs.data() + size_t(i) * c.d;
      const int want = nearest_centroid(x, p.cents_t.data(), p.norms.data(), c.k, c.d);
      const int got = nearest_centroid_avx2(x, p.cents_t.data(), p.norms.data(), c.k, c.d);
      ASSERT_EQ(got, want) << "k " << c.k << " d " << c.d << " x " << i;
      ties += has_later_twin(want, c.k);
    }
  }
  EXPECT_GT(ties, 50);  // the duplicates were hit, and both took the first copy
}

TEST(SrvqNearest, FastestIsAvx2WhereTheCpuHasItAndTheCentroidsAreWhole32s) {
#if defined(__x86_64__)
  const bool avx2 = __builtin_cpu_supports("avx2");
  EXPECT_EQ(fastest_nearest_centroid(128), avx2 ? nearest_centroid_avx2 : nearest_centroid);
  EXPECT_EQ(fastest_nearest_centroid(32), avx2 ? nearest_centroid_avx2 : nearest_centroid);
#endif
  EXPECT_EQ(fastest_nearest_centroid(16), nearest_centroid);  // code_bits 4: the reference
}

// FNV-1a 64 of the codes a codec gives: the constants are what the encoder gave before the AVX2
// path (the training is unchanged), so a changed code is a failure, not a new baseline.
uint64_t codes_hash(int dim, int code_bits) {
  SrvqConfig c;
  c.dim = dim;
  c.code_bits = code_bits;
  c.iterations = 4;
  auto codec = SrvqCodec::train(c, test::structured_rows(400, dim, 21));
  EXPECT_TRUE(codec.ok());
  if (!codec.ok()) return 0;
  const std::vector<float> rows = test::structured_rows(200, dim, 22);
  std::vector<uint8_t> code(codec->row_bytes());
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int r = 0; r < 200; ++r) {
    codec->encode(rows.data() + size_t(r) * dim, code.data());
    for (uint8_t b : code) h = (h ^ b) * 0x100000001b3ULL;
  }
  return h;
}

TEST(SrvqNearest, CodesAreThoseOfTheEncoderBeforeTheFastPath) {
  EXPECT_EQ(codes_hash(256, 7), 0xfb9bb926b65bacbbull) << "d 256, 7 bits";
  EXPECT_EQ(codes_hash(512, 7), 0xfa3ae8505db0159bull) << "d 512, 7 bits";
  EXPECT_EQ(codes_hash(64, 4), 0xacec3cf57862917aull) << "d 64, 4 bits (the reference path)";
}

}  // namespace
}  // namespace infer::memory
