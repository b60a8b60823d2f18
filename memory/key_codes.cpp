// Coding key parts to 8 bits and the portable integer dots (key_codes.h); the AVX-512 VNNI
// path is key_codes_avx512.cpp.
#include "memory/key_codes.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace infer::memory {
namespace {

float round_up(double v) {
  const float f = float(v);
  return double(f) >= v ? f : std::nextafter(f, std::numeric_limits<float>::infinity());
}

// c[i] = round(x[i] / s), s = max|x| / 127; the norms in double (each s c[i] and x[i] - s c[i]
// is exact there), rounded up to float.
template <class Store>
PartCode code_part(const float* x, size_t D, Store store) {
  float amax = 0;
  for (size_t i = 0; i < D; ++i) amax = std::max(amax, std::fabs(x[i]));
  PartCode pc;
  pc.scale = amax / 127.0f;
  double coded = 0, err = 0;
  for (size_t i = 0; i < D; ++i) {
    const int c =
        pc.scale > 0 ? std::clamp(int(std::lrint(x[i] / pc.scale)), -127, 127) : 0;
    store(i, c);
    const double sc = double(pc.scale) * c, r = double(x[i]) - sc;
    coded += sc * sc;
    err += r * r;
  }
  pc.coded_norm = round_up(std::sqrt(coded));
  pc.err_norm = round_up(std::sqrt(err));
  return pc;
}

}  // namespace

PartCode code_key_part(const float* x, size_t D, uint8_t* out) {
  return code_part(x, D, [&](size_t i, int c) { out[i] = uint8_t(c + 128); });
}

PartCode code_query_part(const float* x, size_t D, int8_t* out) {
  return code_part(x, D, [&](size_t i, int c) { out[i] = int8_t(c); });
}

void coded_dots_base(const uint8_t* keys, size_t n, size_t subs, const int8_t* query,
                     size_t parts, size_t D, int32_t* raw) {
  for (size_t k = 0; k < n; ++k) {
    const uint8_t* key = keys + k * subs * D;
    for (size_t p = 0; p < parts; ++p) {
      const int8_t* q = query + p * D;
      for (size_t s = 0; s < subs; ++s) {
        const uint8_t* ks = key + s * D;
        int32_t acc = 0;
        for (size_t i = 0; i < D; ++i) acc += int32_t(ks[i]) * int32_t(q[i]);
        raw[(k * parts + p) * subs + s] = acc;
      }
    }
  }
}

#if defined(INFER_KEY_CODES_AVX512)
void coded_dots_avx512(const uint8_t* keys, size_t n, size_t subs, const int8_t* query,
                       size_t parts, size_t D, int32_t* raw);
#endif

void coded_dots(const uint8_t* keys, size_t n, size_t subs, const int8_t* query, size_t parts,
                size_t D, int32_t* raw) {
#if defined(INFER_KEY_CODES_AVX512)
  static const bool vnni =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni");
  if (vnni && D % 64 == 0) return coded_dots_avx512(keys, n, subs, query, parts, D, raw);
#endif
  coded_dots_base(keys, n, subs, query, parts, D, raw);
}

}  // namespace infer::memory
