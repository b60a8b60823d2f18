// memory/association_kernels.h: the wide paths give the portable paths' bits, and the largest
// units are the set std::nth_element picks, ties at the cut included.
#include "memory/association_kernels.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace infer::memory {
namespace {

TEST(AssociationKernels, MatmulIsMatvecForEveryVectorBitForBit) {
  std::mt19937 rng(1);
  std::normal_distribution<float> g;
  for (const size_t rows : {7, 16, 40, 128}) {
    for (const size_t cols : {1, 33, 300}) {
      std::vector<float> mt(rows * cols);
      for (float& v : mt) v = g(rng);
      for (const size_t T : {1, 3, 4, 5, 16}) {
        const size_t xs = cols + 3, os = rows + 5;
        std::vector<float> x(T * xs), out(T * os, 7.0f), one(rows), wide(rows);
        for (float& v : x) v = g(rng);
        for (size_t t = 0; t < T; ++t) {  // zeros of both signs: columns matvec_t skips
          x[t * xs] = 0.0f;
          if (cols > 2) x[t * xs + 2] = -0.0f;
        }
        matmul_t(mt.data(), rows, cols, x.data(), T, xs, out.data(), os);
        for (size_t t = 0; t < T; ++t) {
          matvec_t_base(mt.data(), rows, cols, x.data() + t * xs, one.data());
          matvec_t(mt.data(), rows, cols, x.data() + t * xs, wide.data());
          ASSERT_EQ(std::memcmp(out.data() + t * os, one.data(), rows * 4), 0)
              << rows << " " << cols << " " << T << " " << t;
          ASSERT_EQ(std::memcmp(wide.data(), one.data(), rows * 4), 0);
          EXPECT_EQ(out[t * os + rows], 7.0f);  // nothing written past the row
        }
      }
    }
  }
}

// The set the lift took before: nth_element over every unit.
std::vector<int> reference_units(const std::vector<float>& x, size_t k) {
  std::vector<int> a(x.size());
  std::iota(a.begin(), a.end(), 0);
  std::nth_element(a.begin(), a.begin() + std::ptrdiff_t(k), a.end(),
                   [&](int i, int j) { return x[size_t(i)] > x[size_t(j)]; });
  a.resize(k);
  std::sort(a.begin(), a.end());
  return a;
}

TEST(AssociationKernels, TheLargestUnitsAreTheSetNthElementPicks) {
  std::mt19937 rng(2);
  std::normal_distribution<float> g;
  std::vector<int> out;
  const size_t m = 2048;
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<float> x(m);
    for (float& v : x) v = g(rng);
    const size_t k = trial % 3 == 0 ? 32 : 1 + size_t(rng() % 200);
    if (trial % 5 == 1) {  // a tie straddling the cut: 40 units share the largest value
      for (int i = 0; i < 40; ++i) x[rng() % m] = 9.0f;
    }
    if (trial % 5 == 2) x.assign(m, 0.0f);  // nothing above the floor
    if (trial % 5 == 3) {                    // a few far above, the rest alike
      x.assign(m, 1.0f);
      for (int i = 0; i < 10; ++i) x[rng() % m] = 50.0f + float(i);
    }
    largest_units(x.data(), m, k, out);
    std::sort(out.begin(), out.end());
    EXPECT_EQ(out, reference_units(x, k)) << trial;
  }
  std::vector<float> x(64);
  for (float& v : x) v = g(rng);
  largest_units(x.data(), 64, 64, out);  // every unit
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, reference_units(x, 64));
}

}  // namespace
}  // namespace infer::memory
