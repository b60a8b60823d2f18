// AVX-512 matmul kernels (16 f32 lanes): vector traits for matmul_simd_inl.h. Built with
// -mavx512f -mavx512bw -mavx512vl -mfma -mf16c; only called when CPUID reports them.
// GCC 12's avx512fintrin.h trips -Wuninitialized on its own `__Y = __Y` (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

#include "model/matrix.h"
#include "model/ops/matmul_kernels.h"
#include "model/quant.h"

namespace infer {
namespace {

struct Avx512 {
  using V = __m512;
  static constexpr int kW = 16;
  // Prefill tile: 6 tokens x 4 rows = 24 accumulators + 4 weight vectors + 1 token vector.
  static constexpr int64_t kMT = 6;
  static constexpr int64_t kMR = 4;

  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float f) { return _mm512_set1_ps(f); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V load_partial(const float* p, int n) {
    return _mm512_maskz_loadu_ps(__mmask16((1u << n) - 1), p);
  }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static float half(uint16_t h) { return _cvtsh_ss(h); }
  static V widen_bf16(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static V bf16(const uint16_t* p) {
    return widen_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static V bf16_partial(const uint16_t* p, int n) {
    return widen_bf16(_mm256_maskz_loadu_epi16(__mmask16((1u << n) - 1), p));
  }
  static V i8(const int8_t* p) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b));
  }
  // Byte j holds weight j (low nibble) and weight j + 16 (high nibble).
  static void q4(const uint8_t* qs, V out[2]) {
    const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    const __m512i eight = _mm512_set1_epi32(8);
    out[0] =
        _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_and_si512(b, _mm512_set1_epi32(15)), eight));
    out[1] = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_srli_epi32(b, 4), eight));
  }
  // Each lane gathers the block's first 4 bytes (its scale, then 2 weight bytes).
  static V scales(const uint8_t* p, int stride, int n) {
    const __m512i idx = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32(stride));
    const __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(),
                                                  __mmask16((1u << n) - 1), idx, p, 1);
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
  }
  static void q8_dot(const int8_t* qs, float d, const V* xv, V* acc) {
    const V s = fma(i8(qs + 16), xv[1], mul(i8(qs), xv[0]));
    acc[0] = fma(set1(d), s, acc[0]);
  }
  static V q4_x(const V*) { return zero(); }  // unused: the table below carries the -8
  // A 16-entry table d·(q - 8) (the reference's dequantized values) indexed by each nibble:
  // vpermps reads only the low 4 bits of an index, so neither masking nor int->float is needed.
  static void q4_dot(const uint8_t* qs, float d, const V* xv, V, V* acc) {
    const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    const V lut =
        mul(_mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7), set1(d));
    acc[0] = fma(_mm512_permutexvar_ps(b, lut), xv[0], acc[0]);
    acc[1] = fma(_mm512_permutexvar_ps(_mm512_srli_epi32(b, 4), lut), xv[1], acc[1]);
  }
  static float reduce(V v) { return _mm512_reduce_add_ps(v); }
  // Four horizontal sums at once: pairwise interleaves, then the four 128-bit lanes.
  static void reduce4(const V* a, float* out) {
    const __m512 s0 = _mm512_add_ps(_mm512_unpacklo_ps(a[0], a[1]), _mm512_unpackhi_ps(a[0], a[1]));
    const __m512 s1 = _mm512_add_ps(_mm512_unpacklo_ps(a[2], a[3]), _mm512_unpackhi_ps(a[2], a[3]));
    const __m512d d0 = _mm512_castps_pd(s0), d1 = _mm512_castps_pd(s1);
    const __m512 s = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(d0, d1)),
                                   _mm512_castpd_ps(_mm512_unpackhi_pd(d0, d1)));
    const __m256 h =
        _mm256_add_ps(_mm512_castps512_ps256(s),
                      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
  }
};

#include "model/ops/matmul_simd_inl.h"

}  // namespace

void matmul_rows_avx512(const Matrix& w, const float* x, int64_t T, float* y, int64_t r0,
                        int64_t r1) {
  matmul_rows_simd<Avx512>(w, x, T, y, r0, r1);
}

}  // namespace infer
