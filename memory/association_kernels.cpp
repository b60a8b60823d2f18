// The arithmetic of association keys and scores (association_kernels.h).
#include "memory/association_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace infer::memory {

// Two 4-lane partial sums (GCC/Clang vector extensions: plain SSE on the x86-64 baseline, NEON
// on Arm), then the lanes in a fixed order: the same bits on every machine.
float dot_base(const float* a, const float* b, size_t n) {
  typedef float f4 __attribute__((vector_size(16)));
  f4 s0 = {0, 0, 0, 0}, s1 = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    f4 a0, a1, b0, b1;
    std::memcpy(&a0, a + i, 16);
    std::memcpy(&a1, a + i + 4, 16);
    std::memcpy(&b0, b + i, 16);
    std::memcpy(&b1, b + i + 4, 16);
    s0 += a0 * b0;
    s1 += a1 * b1;
  }
  const f4 s = s0 + s1;
  float t = (s[0] + s[1]) + (s[2] + s[3]);
  for (; i < n; ++i) t += a[i] * b[i];
  return t;
}

// out[r] = Σ_c m[r, c] x[c], from mt = m transposed [cols, rows]: column by column, so the inner
// loop runs over contiguous rows and vectorizes without reassociating any sum.
void matvec_t_base(const float* mt, size_t rows, size_t cols, const float* x, float* out) {
  std::fill(out, out + rows, 0.0f);
  for (size_t c = 0; c < cols; ++c) {
    const float xc = x[c];
    if (xc == 0.0f) continue;
    const float* col = mt + c * rows;
    for (size_t r = 0; r < rows; ++r) out[r] += col[r] * xc;
  }
}

namespace {


#if defined(__x86_64__)
// The largest of the dots of `parts` query parts with `subs` key parts, each D long, every dot
// with dot_base's arithmetic exactly (the low and high halves of one 8-lane sum are its two
// 4-lane sums; multiply and add stay separate, no FMA) but four of them at once (one query load
// for four key parts): four independent sums instead of one chain that waits on each add.
__attribute__((target("avx"))) float best_dot_avx(const float* query, const float* key,
                                                  size_t parts, size_t subs, size_t D) {
  typedef float f8 __attribute__((vector_size(32)));
  typedef float f4 __attribute__((vector_size(16)));
  float best = 0.0f;
  for (size_t p = 0; p < parts; ++p) {
    const float* q = query + p * D;
    for (size_t s0 = 0; s0 < subs; s0 += 4) {
      const size_t ns = std::min<size_t>(4, subs - s0);
      f8 acc[4] = {};
      size_t i = 0;
      for (; i + 8 <= D; i += 8) {
        f8 qv;
        std::memcpy(&qv, q + i, 32);
        for (size_t j = 0; j < ns; ++j) {
          f8 kv;
          std::memcpy(&kv, key + (s0 + j) * D + i, 32);
          acc[j] += qv * kv;
        }
      }
      for (size_t j = 0; j < ns; ++j) {
        const f4 h = f4{acc[j][0], acc[j][1], acc[j][2], acc[j][3]} +
                     f4{acc[j][4], acc[j][5], acc[j][6], acc[j][7]};
        float t = (h[0] + h[1]) + (h[2] + h[3]);
        for (size_t r = i; r < D; ++r) t += q[r] * key[(s0 + j) * D + r];
        best = std::max(best, t);
      }
    }
  }
  return best;
}
// __builtin_cpu_init first: these run as static initializers, maybe before libgcc's own.
bool have_avx() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx");
}
const bool kHaveAvx = have_avx();
#endif



#if defined(__x86_64__)
// The same sums element by element (no FMA), 8 lanes at a time: a query's key runs this for
// each of its tokens (the lift is 2048 x 128).
__attribute__((target("avx"))) void matvec_t_avx(const float* mt, size_t rows, size_t cols,
                                                 const float* x, float* out) {
  std::fill(out, out + rows, 0.0f);
  for (size_t c = 0; c < cols; ++c) {
    const float xc = x[c];
    if (xc == 0.0f) continue;
    const float* col = mt + c * rows;
    for (size_t r = 0; r < rows; ++r) out[r] += col[r] * xc;
  }
}
#endif


#if defined(__x86_64__)
// matmul_t, four vectors and 16 rows at a time: eight 8-lane sums held in registers across
// every column (multiply, then add: target avx has no FMA to fuse them).
// ld: mt's row stride (its full row count), rows: how many of them, from mt on.
__attribute__((target("avx"))) void matmul_t_avx(const float* mt, size_t ld, size_t rows,
                                                 size_t cols, const float* x, size_t T,
                                                 size_t x_stride, float* out, size_t out_stride) {
  typedef float f8 __attribute__((vector_size(32)));
  const size_t rows16 = rows / 16 * 16, T4 = T / 4 * 4;
  for (size_t r0 = 0; r0 < rows16; r0 += 16) {
    for (size_t t0 = 0; t0 < T4; t0 += 4) {
      f8 acc[4][2] = {};
      const float* x0 = x + t0 * x_stride;
      for (size_t c = 0; c < cols; ++c) {
        f8 m0, m1;
        std::memcpy(&m0, mt + c * ld + r0, 32);
        std::memcpy(&m1, mt + c * ld + r0 + 8, 32);
        for (size_t j = 0; j < 4; ++j) {
          const float xc = x0[j * x_stride + c];
          const f8 xb = {xc, xc, xc, xc, xc, xc, xc, xc};
          acc[j][0] += m0 * xb;
          acc[j][1] += m1 * xb;
        }
      }
      for (size_t j = 0; j < 4; ++j) {
        std::memcpy(out + (t0 + j) * out_stride + r0, &acc[j][0], 32);
        std::memcpy(out + (t0 + j) * out_stride + r0 + 8, &acc[j][1], 32);
      }
    }
  }
  // The rows past the last 16 for every vector, and the vectors past the last 4.
  for (size_t t = 0; t < T; ++t) {
    float* o = out + t * out_stride;
    const float* xt = x + t * x_stride;
    const size_t r_begin = t < T4 ? rows16 : 0;
    if (r_begin == rows) continue;
    std::fill(o + r_begin, o + rows, 0.0f);
    for (size_t c = 0; c < cols; ++c) {
      const float xc = xt[c];
      if (xc == 0.0f) continue;
      const float* col = mt + c * ld;
      for (size_t r = r_begin; r < rows; ++r) o[r] += col[r] * xc;
    }
  }
}
#endif

// matmul_t on the rows [r0, r1) of mt and out only.
void matmul_t_rows(const float* mt, size_t rows, size_t r0, size_t r1, size_t cols,
                   const float* x, size_t T, size_t x_stride, float* out, size_t out_stride) {
#if defined(__x86_64__)
  if (kHaveAvx) {
    return matmul_t_avx(mt + r0, rows, r1 - r0, cols, x, T, x_stride, out + r0, out_stride);
  }
#endif
  for (size_t t = 0; t < T; ++t) {
    float* o = out + t * out_stride;
    std::fill(o + r0, o + r1, 0.0f);
    for (size_t c = 0; c < cols; ++c) {
      const float xc = x[t * x_stride + c];
      if (xc == 0.0f) continue;
      const float* col = mt + c * rows;
      for (size_t r = r0; r < r1; ++r) o[r] += col[r] * xc;
    }
  }
}

}  // namespace

float best_dot(const float* query, const float* key, size_t parts, size_t subs, size_t D) {
#if defined(__x86_64__)
  if (kHaveAvx) return best_dot_avx(query, key, parts, subs, D);
#endif
  float best = 0.0f;
  for (size_t p = 0; p < parts; ++p)
    for (size_t s = 0; s < subs; ++s)
      best = std::max(best, dot_base(query + p * D, key + s * D, D));
  return best;
}

void matvec_t(const float* mt, size_t rows, size_t cols, const float* x, float* out) {
#if defined(__x86_64__)
  if (kHaveAvx) return matvec_t_avx(mt, rows, cols, x, out);
#endif
  matvec_t_base(mt, rows, cols, x, out);
}

void matmul_t(const float* mt, size_t rows, size_t cols, const float* x, size_t T,
              size_t x_stride, float* out, size_t out_stride, ThreadPool* pool) {
  // Split by blocks of 16 rows, the wide path's unit, so every sum is the one-thread sum; each
  // thread streams its own columns' slice of mt (12B's first projection is 16 MB).
  const size_t blocks = (rows + 15) / 16;
  if (pool == nullptr || pool->size() < 2 || blocks < 2) {
    return matmul_t_rows(mt, rows, 0, rows, cols, x, T, x_stride, out, out_stride);
  }
  pool->parallel_for(int64_t(blocks), [&](int64_t b, int64_t e) {
    matmul_t_rows(mt, rows, size_t(b) * 16, std::min(rows, size_t(e) * 16), cols, x, T,
                  x_stride, out, out_stride);
  });
}

// Units above 1.5 times the rms hold the largest (about 7% of N(0, 1) draws, against the 1.6%
// a lift of 32 in 2048 keeps); where they are enough and no tie straddles the cut, the k largest
// are unique and picked among them alone, else (ties, too few) from all of x as before.
void largest_units(const float* x, size_t m, size_t k, std::vector<int>& out) {
  const auto larger = [&](int a, int b) { return x[size_t(a)] > x[size_t(b)]; };
  float ss = 0;
  for (size_t i = 0; i < m; ++i) ss += x[i] * x[i];
  const float floor = 1.5f * std::sqrt(ss / float(m));
  out.clear();
  for (size_t i = 0; i < m; ++i)
    if (x[i] > floor) out.push_back(int(i));
  if (k > 0 && out.size() >= k) {
    std::nth_element(out.begin(), out.begin() + std::ptrdiff_t(k - 1), out.end(), larger);
    const float cut = x[size_t(out[k - 1])];
    const size_t at_least = size_t(
        std::count_if(out.begin(), out.end(), [&](int u) { return x[size_t(u)] >= cut; }));
    if (at_least == k) {
      out.resize(k);
      return;
    }
  }
  out.resize(m);
  std::iota(out.begin(), out.end(), 0);
  std::nth_element(out.begin(), out.begin() + std::ptrdiff_t(k), out.end(), larger);
  out.resize(k);
}

}  // namespace infer::memory
