// Attention: the plain reference, and the driver that cuts each query's keys into runs of
// contiguous K/V rows for a kernel (attention_kernels.h) chosen once by CPUID. Work items are
// (token, KV group, tile of the group's query heads), dealt round-robin to the workers; a single
// token instead splits its keys over the workers and merges their partial softmax states.
#include "model/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/check.h"
#include "model/ops/attention_kernels.h"
#include "model/thread_pool.h"

namespace infer {
namespace {

// The keys of the query at chunk index t, numbered [0, n): cached positions
// [cache_lo, cache_lo + n_cache), then the chunk's positions [chunk_lo, p] (§4.7 window).
struct KeyRange {
  int64_t cache_lo = 0;
  int64_t n_cache = 0;
  int64_t chunk_lo = 0;
  int64_t n = 0;
};

KeyRange key_range(const AttentionShape& s, const KvView& kv, int64_t t) {
  const int64_t p = s.pos0 + t;
  const int64_t lo = s.window > 0 ? std::max<int64_t>(0, p - s.window + 1) : 0;
  KeyRange r;
  r.cache_lo = std::max(lo, kv.cache_begin);
  r.n_cache = std::max<int64_t>(0, s.pos0 - r.cache_lo);
  r.chunk_lo = std::max(lo, s.pos0);
  r.n = r.n_cache + (p - r.chunk_lo + 1);
  return r;
}

// Folds keys [a, b) of r, KV head g, into the tile: at most three runs of rows (the ring up to
// its wrap, the ring from slot 0, the chunk). Cached positions span at most `slots`.
void fold_keys(AttendKeysFn attend, const AttentionTile& tile, const AttentionShape& s,
               const KvView& kv, const KeyRange& r, int64_t g, int64_t a, int64_t b) {
  const int64_t row = s.n_kv * s.d;  // floats per position in cache and chunk
  const int64_t head = g * s.d;
  const int64_t cache_end = std::min(b, r.n_cache);
  int64_t i = a;
  while (i < cache_end) {
    const int64_t slot = (r.cache_lo + i) % kv.slots;
    const int64_t n = std::min(cache_end - i, kv.slots - slot);
    attend(tile, kv.cache_k + slot * row + head, kv.cache_v + slot * row + head, n, row);
    i += n;
  }
  if (i < b) {
    const int64_t c = r.chunk_lo - s.pos0 + (i - r.n_cache);
    attend(tile, kv.chunk_k + c * row + head, kv.chunk_v + c * row + head, b - i, row);
  }
}

// The query heads of one KV group, cut into equal tiles of at most kAttentionTileHeads.
struct HeadTiles {
  int64_t group = 0;  // query heads per KV head
  int64_t count = 0;  // tiles per group
  int64_t heads = 0;  // heads per tile (the last may have fewer)
  explicit HeadTiles(const AttentionShape& s)
      : group(s.n_q / s.n_kv),
        count((group + kAttentionTileHeads - 1) / kAttentionTileHeads),
        heads((group + count - 1) / count) {}
  // Tile j of the token's n_kv·count tiles: KV head, first query head, number of heads.
  void at(int64_t j, int64_t* g, int64_t* h0, int* nh) const {
    *g = j / count;
    const int64_t first = (j % count) * heads;
    *h0 = *g * group + first;
    *nh = int(std::min(heads, group - first));
  }
};

// Most workers one call uses (the merge of a split keeps one weight per worker on the stack).
constexpr int kMaxSplit = 64;

std::vector<AttentionKernel> supported_kernels() {
  std::vector<AttentionKernel> k;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma")) {
    k.push_back({"avx512", 16, attend_keys_avx512, exp_avx512});
  }
#endif
  k.push_back({"generic", 1, attend_keys_generic, exp_generic});
  return k;
}

const std::vector<AttentionKernel>& kernels() {
  static const std::vector<AttentionKernel> k = supported_kernels();
  return k;
}

}  // namespace

std::span<const AttentionKernel> attention_kernels() { return kernels(); }

int64_t attention_partial_floats(int64_t n_q, int64_t d) { return n_q * (d + 2); }

int64_t attention_max_keys(int64_t window, int64_t max_positions) {
  return window > 0 ? std::min(window, max_positions) : max_positions;
}

namespace {

// One call's inputs, and its two ways of running: by items or, for one token, by key ranges.
struct AttentionJob {
  AttendKeysFn attend;
  const float* q;
  const AttentionShape& s;
  const KvView& kv;
  float* out;
  HeadTiles tiles;
  int64_t per_token;  // tiles per token

  // Item i (token i / per_token, tile i % per_token) for i = w, w + stride, ...; o is written
  // straight into out, then divided by the softmax sum.
  void run_items(int64_t w, int64_t stride) const {
    const int64_t d = s.d;
    for (int64_t i = w; i < s.T * per_token; i += stride) {
      const int64_t t = i / per_token;
      int64_t g, h0;
      int nh;
      tiles.at(i % per_token, &g, &h0, &nh);
      float m[kAttentionTileHeads], l[kAttentionTileHeads];
      std::fill(m, m + nh, -INFINITY);
      std::fill(l, l + nh, 0.0f);
      const int64_t off = (t * s.n_q + h0) * d;
      const KeyRange r = key_range(s, kv, t);
      fold_keys(attend, AttentionTile{q + off, out + off, m, l, nh, d}, s, kv, r, g, 0, r.n);
      for (int h = 0; h < nh; ++h) {
        const float inv = 1.0f / l[h];
        for (int64_t j = 0; j < d; ++j) out[off + h * d + j] *= inv;
      }
    }
  }

  // One token (T = 1): worker w of W folds keys [n·w/W, n·(w+1)/W) of every tile into its
  // partial state, row w of `partial`: o [n_q, d], m [n_q], l [n_q].
  void run_key_range(int64_t w, int W, float* partial) const {
    const int64_t d = s.d, n_q = s.n_q;
    float* m = partial + n_q * d;
    float* l = m + n_q;
    std::fill(m, m + n_q, -INFINITY);
    std::fill(l, l + n_q, 0.0f);
    const KeyRange r = key_range(s, kv, 0);
    const int64_t a = r.n * w / W, b = r.n * (w + 1) / W;
    if (a == b) return;
    for (int64_t j = 0; j < per_token; ++j) {
      int64_t g, h0;
      int nh;
      tiles.at(j, &g, &h0, &nh);
      fold_keys(attend, AttentionTile{q + h0 * d, partial + h0 * d, m + h0, l + h0, nh, d}, s, kv,
                r, g, a, b);
    }
  }

  // out = Σ_w e^(m_w − M)·o_w / Σ_w e^(m_w − M)·l_w with M = max_w m_w, per head.
  void merge(int W, const float* partial, int64_t row_floats) const {
    const int64_t d = s.d, n_q = s.n_q;
    for (int64_t h = 0; h < n_q; ++h) {
      float mx = -INFINITY;
      for (int w = 0; w < W; ++w) mx = std::max(mx, partial[w * row_floats + n_q * d + h]);
      float c[kMaxSplit];
      float sum = 0.0f;
      for (int w = 0; w < W; ++w) {
        const float* m = partial + w * row_floats + n_q * d;
        c[w] = m[n_q + h] > 0.0f ? std::exp(m[h] - mx) : 0.0f;  // no keys: l = 0, o unset
        sum += c[w] * m[n_q + h];
      }
      float* oh = out + h * d;
      std::fill(oh, oh + d, 0.0f);
      for (int w = 0; w < W; ++w) {
        if (c[w] == 0.0f) continue;
        const float f = c[w] / sum;
        const float* ow = partial + w * row_floats + h * d;
        for (int64_t j = 0; j < d; ++j) oh[j] += f * ow[j];
      }
    }
  }
};

}  // namespace

void attention_with(const AttentionKernel& kernel, const float* q, const AttentionShape& s,
                    const KvView& kv, float* out, const AttentionScratch& scratch,
                    ThreadPool& pool) {
  INFER_CHECK(s.n_kv > 0 && s.n_q % s.n_kv == 0, "n_q %lld, n_kv %lld", (long long)s.n_q,
              (long long)s.n_kv);
  const AttendKeysFn attend =
      s.d % kernel.d_multiple == 0 ? kernel.attend_keys : kernels().back().attend_keys;
  const HeadTiles tiles(s);
  const AttentionJob job{attend, q, s, kv, out, tiles, s.n_kv * tiles.count};

  // Below ~128k multiply-adds a pool dispatch costs more than it saves (short decode contexts).
  const int64_t max_keys = s.window > 0 ? std::min(s.window, s.pos0 + s.T) : s.pos0 + s.T;
  const int64_t work = s.T * s.n_q * max_keys * s.d;
  const int n_workers =
      work < (int64_t(1) << 17) ? 1 : std::min({scratch.n_workers, pool.size(), kMaxSplit});
  if (n_workers <= 1) {
    job.run_items(0, 1);
  } else if (s.T == 1 && scratch.row_floats >= attention_partial_floats(s.n_q, s.d)) {
    pool.parallel_for(n_workers, [&](int64_t w0, int64_t w1) {
      for (int64_t w = w0; w < w1; ++w) {
        job.run_key_range(w, n_workers, scratch.partial + w * scratch.row_floats);
      }
    });
    job.merge(n_workers, scratch.partial, scratch.row_floats);
  } else {
    pool.parallel_for(n_workers, [&](int64_t w0, int64_t w1) {
      for (int64_t w = w0; w < w1; ++w) job.run_items(w, n_workers);
    });
  }
}

void attention(const float* q, const AttentionShape& s, const KvView& kv, float* out,
               const AttentionScratch& scratch, ThreadPool& pool) {
  static const AttentionKernel& best = kernels().front();
  attention_with(best, q, s, kv, out, scratch, pool);
}

void attention_reference(const float* q, const AttentionShape& s, const KvView& kv, float* out) {
  const int64_t d = s.d, row = s.n_kv * s.d;
  std::vector<double> score;
  for (int64_t t = 0; t < s.T; ++t) {
    const int64_t p = s.pos0 + t;
    const int64_t lo = std::max(kv.cache_begin, s.window > 0 ? p - s.window + 1 : int64_t(0));
    for (int64_t h = 0; h < s.n_q; ++h) {
      const int64_t g = h / (s.n_q / s.n_kv);
      const float* qh = q + (t * s.n_q + h) * d;
      auto key = [&](const float* cache, const float* chunk, int64_t pos) {
        return pos < s.pos0 ? cache + (pos % kv.slots) * row + g * d
                            : chunk + (pos - s.pos0) * row + g * d;
      };
      score.assign(size_t(p - lo + 1), 0.0);
      for (int64_t pos = lo; pos <= p; ++pos) {
        const float* k = key(kv.cache_k, kv.chunk_k, pos);
        double dot = 0.0;
        for (int64_t j = 0; j < d; ++j) dot += double(qh[j]) * double(k[j]);
        score[size_t(pos - lo)] = dot;
      }
      const double mx = *std::max_element(score.begin(), score.end());
      double sum = 0.0;
      for (double& x : score) sum += (x = std::exp(x - mx));
      float* oh = out + (t * s.n_q + h) * d;
      for (int64_t j = 0; j < d; ++j) {
        double acc = 0.0;
        for (int64_t pos = lo; pos <= p; ++pos) {
          acc += score[size_t(pos - lo)] * double(key(kv.cache_v, kv.chunk_v, pos)[j]);
        }
        oh[j] = float(acc / sum);
      }
    }
  }
}

}  // namespace infer
