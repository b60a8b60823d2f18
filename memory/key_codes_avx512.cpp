// coded_dots on AVX-512 VNNI (key_codes.h), compiled with its own ISA flags and chosen at run
// time: vpdpwssd multiplies 32 key codes by 32 query codes and adds them in pairs to 16 int32
// lanes. Integer sums in any order are the portable loop's, and code_limit keeps every partial
// sum inside int32.
#include <immintrin.h>

#include "memory/key_codes.h"

namespace infer::memory {
namespace {

// The sum of the 16 lanes, by storing them (GCC 12's _mm512_reduce_add_epi32 and lane shuffles
// draw a false -Wmaybe-uninitialized from their undefined-register operands).
int32_t lane_sum(__m512i v) {
  alignas(64) int32_t l[16];
  _mm512_store_si512(l, v);
  int32_t s = 0;
  for (int i = 0; i < 16; ++i) s += l[i];
  return s;
}

// Keys read ahead: each is its own short stream (2 KB at E2B's key size, two to a page), and
// the hardware prefetcher stops at every page, so a cold scan waited on memory at each.
constexpr size_t kAhead = 4;

}  // namespace

void coded_dots_avx512(const int16_t* keys, size_t n, size_t subs, const int16_t* query,
                       size_t parts, size_t D, int32_t* dots) {
  const size_t key_bytes = subs * D * sizeof(int16_t);
  for (size_t k = 0; k < n; ++k) {
    const int16_t* key = keys + k * subs * D;
    if (k + kAhead < n) {
      const char* next = reinterpret_cast<const char*>(key) + kAhead * key_bytes;
      for (size_t b = 0; b < key_bytes; b += 64) _mm_prefetch(next + b, _MM_HINT_T0);
    }
    for (size_t s = 0; s < subs; ++s) {
      const int16_t* ks = key + s * D;
      size_t p = 0;
      for (; p + 2 <= parts; p += 2) {
        const int16_t* q0 = query + p * D;
        const int16_t* q1 = q0 + D;
        __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
        for (size_t i = 0; i < D; i += 32) {
          const __m512i kv = _mm512_loadu_si512(ks + i);
          a0 = _mm512_dpwssd_epi32(a0, kv, _mm512_loadu_si512(q0 + i));
          a1 = _mm512_dpwssd_epi32(a1, kv, _mm512_loadu_si512(q1 + i));
        }
        dots[(k * parts + p) * subs + s] = lane_sum(a0);
        dots[(k * parts + p + 1) * subs + s] = lane_sum(a1);
      }
      for (; p < parts; ++p) {
        const int16_t* q0 = query + p * D;
        __m512i a0 = _mm512_setzero_si512();
        for (size_t i = 0; i < D; i += 32)
          a0 = _mm512_dpwssd_epi32(a0, _mm512_loadu_si512(ks + i), _mm512_loadu_si512(q0 + i));
        dots[(k * parts + p) * subs + s] = lane_sum(a0);
      }
    }
  }
}

}  // namespace infer::memory
