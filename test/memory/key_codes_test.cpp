// key_codes.h: the codes bound what they lose, every dot of codes fits in int32 and the fast
// path's integer dots equal the portable loop's.
#include "memory/key_codes.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace infer::memory {
namespace {

TEST(KeyCodes, TheLimitKeepsEveryDotInsideInt32) {
  for (const size_t D : {1, 7, 32, 100, 256, 1024, 65536}) {
    const int64_t L = code_limit(D);
    ASSERT_GT(L, 0) << D;
    EXPECT_LE(int64_t(D) * L * L, int64_t(INT32_MAX)) << D;
    if (L < 32767) {
      EXPECT_GT(int64_t(D) * (L + 1) * (L + 1), int64_t(INT32_MAX)) << D;
    }
  }
  EXPECT_EQ(code_limit(0), 0);
  EXPECT_EQ(code_limit(size_t(1) << 32), 0);  // too long to code: the exact path scores it
}

TEST(KeyCodes, ThePartIsItsScaledCodesPlusAnErrorNoLongerThanStated) {
  std::mt19937 rng(3);
  std::normal_distribution<float> g;
  for (const size_t D : {1, 31, 256}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> x(D);
      for (float& v : x) v = g(rng) * (trial % 2 ? 1e-3f : 1.0f);
      if (trial == 0) x.assign(D, 0.0f);
      std::vector<int16_t> c(D);
      const PartCode pc = code_part(x.data(), D, c.data());
      const int32_t L = code_limit(D);
      double coded = 0, err = 0, amax = 0;
      for (size_t i = 0; i < D; ++i) {
        ASSERT_LE(std::abs(int32_t(c[i])), L);
        const double sc = double(pc.scale) * c[i];
        coded += sc * sc;
        err += (x[i] - sc) * (x[i] - sc);
        amax = std::max(amax, std::fabs(double(x[i])));
        // Rounded to the nearest code: within half a step (x / s itself rounds in float).
        EXPECT_LE(std::fabs(double(x[i]) - sc), 0.5 * pc.scale * (1 + 1e-4) + 1e-30);
      }
      EXPECT_GE(double(pc.coded_norm), std::sqrt(coded));
      EXPECT_GE(double(pc.err_norm), std::sqrt(err));
      EXPECT_LE(double(pc.err_norm), std::sqrt(err) * (1 + 1e-6) + 1e-30);
      EXPECT_NEAR(double(pc.scale) * L, amax, amax * 1e-6);
    }
  }
}

TEST(KeyCodes, TheFastDotsAreThePortableOnesAtTheExtremes) {
  std::mt19937 rng(5);
  for (const size_t D : {32, 64, 256, 40}) {
    const int32_t L = code_limit(D);
    std::uniform_int_distribution<int32_t> code(-L, L);
    for (const size_t parts : {1, 2, 3, 4}) {
      const size_t subs = 4, n = 37;
      std::vector<int16_t> keys(n * subs * D), query(parts * D);
      for (auto& v : keys) v = int16_t(code(rng));
      for (auto& v : query) v = int16_t(code(rng));
      // Key 0 and query part 0 at the limit, alike and opposite: the largest sums there are.
      for (size_t i = 0; i < D; ++i) {
        query[i] = int16_t(L);
        keys[i] = int16_t(L);
        keys[D + i] = int16_t(-L);
      }
      std::vector<int32_t> fast(n * parts * subs), base(fast.size());
      coded_dots(keys.data(), n, subs, query.data(), parts, D, fast.data());
      coded_dots_base(keys.data(), n, subs, query.data(), parts, D, base.data());
      EXPECT_EQ(fast, base) << D << " " << parts;
      for (size_t k = 0; k < n; ++k)
        for (size_t p = 0; p < parts; ++p)
          for (size_t s = 0; s < subs; ++s) {
            int64_t ref = 0;
            for (size_t i = 0; i < D; ++i)
              ref += int64_t(keys[(k * subs + s) * D + i]) * query[p * D + i];
            ASSERT_EQ(int64_t(base[(k * parts + p) * subs + s]), ref);
          }
      EXPECT_EQ(int64_t(base[0]), int64_t(D) * L * L);
      EXPECT_EQ(int64_t(base[1]), -int64_t(D) * L * L);
    }
  }
}

}  // namespace
}  // namespace infer::memory
