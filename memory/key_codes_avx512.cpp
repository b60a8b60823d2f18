// coded_dots on AVX-512 VNNI (key_codes.h), compiled with its own ISA flags and chosen at run
// time: vpdpbusd multiplies 64 unsigned key codes by 64 signed query codes and adds them in
// fours to 16 int32 lanes, exactly as the portable loop does one by one.
#include <immintrin.h>

#include "memory/key_codes.h"

namespace infer::memory {
namespace {

// The sum of the 16 lanes (GCC 12's _mm512_reduce_add_epi32 draws a false -Wmaybe-uninitialized
// from its _mm256_undefined_si256): halves folded within the register, all lanes end equal.
int32_t lane_sum(__m512i v) {
  v = _mm512_add_epi32(v, _mm512_shuffle_i64x2(v, v, 0x4e));  // 256-bit halves swapped
  v = _mm512_add_epi32(v, _mm512_shuffle_i64x2(v, v, 0xb1));  // 128-bit quarters swapped
  v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, _MM_PERM_BADC));
  v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, _MM_PERM_CDAB));
  return _mm512_cvtsi512_si32(v);
}

}  // namespace

void coded_dots_avx512(const uint8_t* keys, size_t n, size_t subs, const int8_t* query,
                       size_t parts, size_t D, int32_t* raw) {
  for (size_t k = 0; k < n; ++k) {
    const uint8_t* key = keys + k * subs * D;
    // The next key's first lines: each key starts a new stream for the hardware prefetcher.
    if (k + 2 < n) _mm_prefetch(reinterpret_cast<const char*>(key + 2 * subs * D), _MM_HINT_T0);
    for (size_t s = 0; s < subs; ++s) {
      const uint8_t* ks = key + s * D;
      size_t p = 0;
      for (; p + 2 <= parts; p += 2) {
        const int8_t* q0 = query + p * D;
        const int8_t* q1 = q0 + D;
        __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
        for (size_t i = 0; i < D; i += 64) {
          const __m512i kv = _mm512_loadu_si512(ks + i);
          a0 = _mm512_dpbusd_epi32(a0, kv, _mm512_loadu_si512(q0 + i));
          a1 = _mm512_dpbusd_epi32(a1, kv, _mm512_loadu_si512(q1 + i));
        }
        raw[(k * parts + p) * subs + s] = lane_sum(a0);
        raw[(k * parts + p + 1) * subs + s] = lane_sum(a1);
      }
      for (; p < parts; ++p) {
        const int8_t* q0 = query + p * D;
        __m512i a0 = _mm512_setzero_si512();
        for (size_t i = 0; i < D; i += 64)
          a0 = _mm512_dpbusd_epi32(a0, _mm512_loadu_si512(ks + i), _mm512_loadu_si512(q0 + i));
        raw[(k * parts + p) * subs + s] = lane_sum(a0);
      }
    }
  }
}

}  // namespace infer::memory
