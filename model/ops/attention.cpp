// Attention reference: per (query, head) a scores row, max-subtracted softmax, weighted sum of V.
// Work items (t, h) are dealt round-robin to pool.size() workers, each with its own scores row.
#include "model/ops/attention.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "model/thread_pool.h"

namespace infer {
namespace {

// q·k over d floats with 16 independent partial sums: a single running sum is one long add chain
// the compiler may not reorder (it would change rounding), which made attention latency-bound.
inline float dot16(const float* a, const float* b, int64_t d) {
  float acc[16] = {};
  int64_t j = 0;
  for (; j + 16 <= d; j += 16) {
    for (int k = 0; k < 16; ++k) acc[k] += a[j + k] * b[j + k];
  }
  float dot = 0.0f;
  for (; j < d; ++j) dot += a[j] * b[j];
  for (float v : acc) dot += v;
  return dot;
}

// This file is built for baseline x86-64 (SSE2); the per-key loops below are most of a decode
// step at long context, so they are also compiled for AVX-512 and chosen at load by CPUID (GCC
// function multiversioning; dot16 and the V sums inline into each clone).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define INFER_ATTENTION_CLONES __attribute__((target_clones("arch=x86-64-v4", "default")))
#else
#define INFER_ATTENTION_CLONES
#endif

// One query row of one head: q_h [d] -> out_h [d]. scores: [max_keys] scratch.
INFER_ATTENTION_CLONES void attend_one(const float* q_h, int64_t t, int64_t h, const AttentionShape& s, const KvView& kv,
                float* scores, int64_t max_keys, float* out_h) {
  const int64_t p = s.pos0 + t;
  const int64_t g = h / (s.n_q / s.n_kv);  // contiguous GQA grouping (§4.5)
  const int64_t lo = s.window > 0 ? std::max<int64_t>(0, p - s.window + 1) : 0;
  const int64_t cache_lo = std::max(lo, kv.cache_begin);
  const int64_t chunk_lo = std::max(lo, s.pos0);
  const int64_t n_keys = std::max<int64_t>(0, s.pos0 - cache_lo) + (p - chunk_lo + 1);
  INFER_DCHECK(n_keys <= max_keys, "%lld keys > %lld", (long long)n_keys, (long long)max_keys);
  (void)max_keys;
  const int64_t d = s.d;
  const int64_t row = s.n_kv * d;  // floats per position in cache and chunk

  // Keys in position order: cached ones, then the chunk's up to and including p.
  auto key = [&](int64_t pos) -> const float* {
    return pos < s.pos0 ? kv.cache_k + (pos % kv.slots) * row + g * d
                        : kv.chunk_k + (pos - s.pos0) * row + g * d;
  };
  auto value = [&](int64_t pos) -> const float* {
    return pos < s.pos0 ? kv.cache_v + (pos % kv.slots) * row + g * d
                        : kv.chunk_v + (pos - s.pos0) * row + g * d;
  };
  auto for_each_pos = [&](auto&& f) {
    int64_t k = 0;
    for (int64_t pos = cache_lo; pos < s.pos0; ++pos) f(pos, k++);
    for (int64_t pos = chunk_lo; pos <= p; ++pos) f(pos, k++);
  };

  float mx = -INFINITY;
  for_each_pos([&](int64_t pos, int64_t k) {
    const float* kr = key(pos);
    const float dot = dot16(q_h, kr, d);
    scores[k] = dot;
    mx = std::max(mx, dot);
  });
  double sum = 0.0;
  for (int64_t k = 0; k < n_keys; ++k) {
    scores[k] = std::exp(scores[k] - mx);
    sum += scores[k];
  }
  const float inv = float(1.0 / sum);
  std::fill(out_h, out_h + d, 0.0f);
  for_each_pos([&](int64_t pos, int64_t k) {
    const float* vr = value(pos);
    const float w = scores[k] * inv;
    for (int64_t j = 0; j < d; ++j) out_h[j] += w * vr[j];
  });
}

}  // namespace

int64_t attention_max_keys(int64_t window, int64_t max_positions) {
  return window > 0 ? std::min(window, max_positions) : max_positions;
}

void attention(const float* q, const AttentionShape& s, const KvView& kv, float* out,
               const AttentionScratch& scratch, ThreadPool& pool) {
  INFER_CHECK(s.n_kv > 0 && s.n_q % s.n_kv == 0, "n_q %lld, n_kv %lld", (long long)s.n_q,
              (long long)s.n_kv);
  const int64_t items = s.T * s.n_q;
  auto run_worker = [&](int64_t w, int64_t stride) {
    float* scores = scratch.scores + w * scratch.max_keys;
    for (int64_t i = w; i < items; i += stride) {
      const int64_t t = i / s.n_q;
      const int64_t h = i % s.n_q;
      const int64_t off = (t * s.n_q + h) * s.d;
      attend_one(q + off, t, h, s, kv, scores, scratch.max_keys, out + off);
    }
  };
  // Below ~32k multiply-adds a pool dispatch costs more than it saves (short decode contexts).
  const int64_t keys_estimate = std::min<int64_t>(s.pos0 + s.T, scratch.max_keys);
  const int64_t work = items * keys_estimate * s.d;
  const int n_workers = std::min<int>(scratch.n_workers, pool.size());
  if (n_workers <= 1 || work < (int64_t(1) << 15)) {
    run_worker(0, 1);
    return;
  }
  pool.parallel_for(n_workers, [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) run_worker(w, n_workers);
  });
}

}  // namespace infer
