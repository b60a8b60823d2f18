// Internal to attention: the per-tile kernel every attention path runs (portable, AVX-512), its
// vectorised exp, and the run-time list of kernels this CPU supports (for tests and benchmarks).
#pragma once

#include <cstdint>
#include <span>

#include "model/ops/attention.h"

namespace infer {

// Query heads folded together over one pass of K/V rows: all heads of a GQA group share their
// K/V head (§4.5), so each row is read once per tile instead of once per head.
constexpr int kAttentionTileHeads = 8;
// Keys scored, exponentiated and summed into V per step of the online softmax.
constexpr int64_t kAttentionBlockKeys = 64;

// Online-softmax state of n_heads <= kAttentionTileHeads query heads of one token over the keys
// folded in so far: m the running max score, l = Σ exp(score − m), o = Σ exp(score − m)·v
// (unnormalised). Before the first key m = −∞ and l = 0; o is then ignored, not read.
struct AttentionTile {
  const float* q = nullptr;  // [n_heads, d]
  float* o = nullptr;        // [n_heads, d]
  float* m = nullptr;        // [n_heads]
  float* l = nullptr;        // [n_heads]
  int n_heads = 0;
  int64_t d = 0;
};

// Folds n keys into the tile: k, v: [n, stride] f32, the first d floats of each row used.
using AttendKeysFn = void (*)(const AttentionTile& tile, const float* k, const float* v, int64_t n,
                              int64_t stride);
// y[i] = exp(x[i]) to ~1 ulp (0 below −103.9, +∞ above 88.8); y may alias x.
using ExpFn = void (*)(const float* x, float* y, int64_t n);

struct AttentionKernel {
  const char* name;
  int64_t d_multiple;  // head dims it takes; others fall back to the generic kernel
  AttendKeysFn attend_keys;
  ExpFn exp;
};

void attend_keys_generic(const AttentionTile& tile, const float* k, const float* v, int64_t n,
                         int64_t stride);
void exp_generic(const float* x, float* y, int64_t n);
void attend_keys_avx512(const AttentionTile& tile, const float* k, const float* v, int64_t n,
                        int64_t stride);
void exp_avx512(const float* x, float* y, int64_t n);

// Kernels this CPU runs, best first; the last is the generic one.
std::span<const AttentionKernel> attention_kernels();

// attention() with a given kernel (tests compare every kernel with attention_reference).
void attention_with(const AttentionKernel& kernel, const float* q, const AttentionShape& s,
                    const KvView& kv, float* out, const AttentionScratch& scratch,
                    ThreadPool& pool);

}  // namespace infer
