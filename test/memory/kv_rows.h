// Synthetic KV rows for the memory tests (test/memory, test/actors): rows with structure like K
// rows, and blocks of tokens carrying them in the tiered layers' shapes, as the ring's eviction
// sink and read_kv hand them over. Header-only: the actors tests include it too.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "memory/episodic_memory.h"
#include "memory/splitmix.h"
#include "model/kv_ring_api.h"

namespace infer::test {

// Uniform in [-1, 1) with 24 bits.
inline float symmetric_uniform(memory::SplitMix64& r) {
  return float(r.next() >> 40) / float(1 << 24) * 2.0f - 1.0f;
}

// [n, dim] rows: a few directions shared by every call (one fixed basis) mixed with per-row
// noise, gains from 2 to 22; seed picks the rows.
inline std::vector<float> structured_rows(int n, int dim, uint64_t seed) {
  constexpr int kBasis = 6;
  memory::SplitMix64 basis_rng{12345};
  std::vector<float> basis(size_t(kBasis) * dim);
  for (float& b : basis) b = symmetric_uniform(basis_rng);
  memory::SplitMix64 r{seed};
  std::vector<float> rows(size_t(n) * dim);
  for (int i = 0; i < n; ++i) {
    float w[kBasis];
    for (float& x : w) x = symmetric_uniform(r);
    const float gain = 2.0f + 10.0f * (symmetric_uniform(r) + 1.0f);
    float* row = &rows[size_t(i) * dim];
    for (int t = 0; t < dim; ++t) {
      float v = 0.3f * symmetric_uniform(r);
      for (int b = 0; b < kBasis; ++b) v += w[b] * basis[size_t(b) * dim + t];
      row[t] = v;
    }
    double nn = 0;
    for (int t = 0; t < dim; ++t) nn += double(row[t]) * row[t];
    for (int t = 0; t < dim; ++t) row[t] = float(row[t] * gain / std::sqrt(nn));
  }
  return rows;
}

// Tokens [p0, p0 + n) in `shapes`' layers: id 1000 + pos, and rows that follow from (seed,
// position, layer, K/V) alone, so the same position always carries the same rows.
inline KvBlock token_block(const std::vector<memory::TieredShape>& shapes, int64_t p0, int64_t n,
                           uint64_t seed = 1) {
  KvBlock b;
  for (const memory::TieredShape& s : shapes) b.layers.push_back(s.layer);
  b.k.resize(shapes.size());
  b.v.resize(shapes.size());
  for (int64_t p = p0; p < p0 + n; ++p) {
    b.pos.push_back(p);
    b.ids.push_back(int32_t(1000 + p));
    for (size_t l = 0; l < shapes.size(); ++l) {
      for (int kv = 0; kv < 2; ++kv) {
        const uint64_t row_seed = seed * 0x9e3779b97f4a7c15ull + uint64_t(p) * 64 + l * 2 + kv;
        const std::vector<float> rows =
            structured_rows(shapes[l].num_key_value_heads, shapes[l].head_dim, row_seed);
        auto& dst = kv == 0 ? b.k[l] : b.v[l];
        dst.insert(dst.end(), rows.begin(), rows.end());
      }
    }
  }
  return b;
}

}  // namespace infer::test
