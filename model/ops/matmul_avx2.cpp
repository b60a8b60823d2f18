// AVX2 matmul kernels (8 f32 lanes): vector traits for matmul_simd_inl.h. Built with -mavx2 -mfma
// -mf16c; only called when CPUID reports them.
#include <immintrin.h>

#include <cstdint>

#include "model/matrix.h"
#include "model/ops/matmul_kernels.h"
#include "model/quant.h"

namespace infer {
namespace {

struct Avx2 {
  using V = __m256;
  static constexpr int kW = 8;
  // Prefill tile: 4 tokens x 3 rows = 12 accumulators + 3 weight vectors + 1 token vector = 16.
  static constexpr int64_t kMT = 4;
  static constexpr int64_t kMR = 3;

  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float f) { return _mm256_set1_ps(f); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static __m256i lanes_below(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V load_partial(const float* p, int n) { return _mm256_maskload_ps(p, lanes_below(n)); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static float half(uint16_t h) { return _cvtsh_ss(h); }
  static V widen_bf16(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static V bf16(const uint16_t* p) {
    return widen_bf16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static V bf16_partial(const uint16_t* p, int n) {  // tails only: no masked 16-bit load in AVX2
    alignas(16) uint16_t buf[8] = {};
    for (int i = 0; i < n; ++i) buf[i] = p[i];
    return widen_bf16(_mm_load_si128(reinterpret_cast<const __m128i*>(buf)));
  }
  static V i8(const int8_t* p) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
  }
  // Byte j holds weight j (low nibble) and weight j + 16 (high nibble): bytes 0-7 give weights
  // 0-7 and 16-23, bytes 8-15 give 8-15 and 24-31.
  static void q4(const uint8_t* qs, V out[4]) {
    const __m256i b0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs)));
    const __m256i b1 =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs + 8)));
    const __m256i m = _mm256_set1_epi32(15), eight = _mm256_set1_epi32(8);
    out[0] = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(b0, m), eight));
    out[1] = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(b1, m), eight));
    out[2] = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(b0, 4), eight));
    out[3] = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(b1, 4), eight));
  }
  // Each lane gathers the block's first 4 bytes (its scale, then 2 weight bytes).
  static V scales(const uint8_t* p, int stride, int n) {
    const __m256i idx =
        _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(stride));
    const __m256i g = _mm256_mask_i32gather_epi32(_mm256_setzero_si256(),
                                                  reinterpret_cast<const int*>(p), idx,
                                                  lanes_below(n), 1);
    // Low halves of the 8 dwords into the low 128 bits.
    const __m256i lo = _mm256_and_si256(g, _mm256_set1_epi32(0xffff));
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, lo), 0x08);
    return _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
  }
  static void q8_dot(const int8_t* qs, float d, const V* xv, V* acc) {
    V s = fma(i8(qs + 8), xv[1], mul(i8(qs), xv[0]));
    s = fma(i8(qs + 16), xv[2], s);
    s = fma(i8(qs + 24), xv[3], s);
    acc[0] = fma(set1(d), s, acc[0]);
  }
  // Q4_0 folds the -8 out of the weights: d · (sum q · x - 8 · sum x), where q4_x gives the
  // lanes of -8 · x summed over the block's 4 vectors (shared by all rows), so the nibbles need no
  // subtraction and each block-row is one chain of FMAs.
  static V q4_x(const V* xv) {
    return mul(add(add(xv[0], xv[1]), add(xv[2], xv[3])), set1(-8.0f));
  }
  static void q4_dot(const uint8_t* qs, float d, const V* xv, V xq4, V* acc) {
    const __m256i b0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs)));
    const __m256i b1 =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs + 8)));
    const __m256i m = _mm256_set1_epi32(15);
    V s = fma(_mm256_cvtepi32_ps(_mm256_and_si256(b0, m)), xv[0], xq4);
    s = fma(_mm256_cvtepi32_ps(_mm256_and_si256(b1, m)), xv[1], s);
    s = fma(_mm256_cvtepi32_ps(_mm256_srli_epi32(b0, 4)), xv[2], s);
    s = fma(_mm256_cvtepi32_ps(_mm256_srli_epi32(b1, 4)), xv[3], s);
    acc[0] = fma(set1(d), s, acc[0]);
  }
  static float reduce(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static void reduce4(const V* a, float* out) {
    for (int i = 0; i < 4; ++i) out[i] = reduce(a[i]);
  }
};

#include "model/ops/matmul_simd_inl.h"

}  // namespace

void matmul_rows_avx2(const Matrix& w, const float* x, int64_t T, float* y, int64_t r0,
                      int64_t r1) {
  matmul_rows_simd<Avx2>(w, x, T, y, r0, r1);
}

}  // namespace infer
