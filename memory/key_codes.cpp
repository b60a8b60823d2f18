// Coding key parts and the portable integer dots (key_codes.h); the AVX-512 VNNI path is
// key_codes_avx512.cpp.
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

}  // namespace

int32_t code_limit(size_t D) {
  if (D == 0) return 0;
  int64_t L = std::min<int64_t>(32767, int64_t(std::sqrt(double(INT32_MAX) / double(D))));
  while (L > 0 && int64_t(D) * L * L > INT32_MAX) --L;
  return int32_t(L);
}

// c[i] = round(x[i] / s); the norms in double (each s c[i] and x[i] - s c[i] is exact there, up
// to one rounding of the difference), rounded up to float.
PartCode code_part(const float* x, size_t D, int16_t* out) {
  const int32_t L = code_limit(D);
  float amax = 0;
  for (size_t i = 0; i < D; ++i) amax = std::max(amax, std::fabs(x[i]));
  PartCode pc;
  pc.scale = L > 0 ? amax / float(L) : 0.0f;
  double coded = 0, err = 0;
  for (size_t i = 0; i < D; ++i) {
    const int32_t c =
        pc.scale > 0 ? std::clamp(int32_t(std::lrint(x[i] / pc.scale)), -L, L) : 0;
    out[i] = int16_t(c);
    const double sc = double(pc.scale) * c, r = double(x[i]) - sc;
    coded += sc * sc;
    err += r * r;
  }
  pc.coded_norm = round_up(std::sqrt(coded));
  pc.err_norm = round_up(std::sqrt(err) * (1 + 1e-12));
  return pc;
}

void coded_dots_base(const int16_t* keys, size_t n, size_t subs, const int16_t* query,
                     size_t parts, size_t D, int32_t* dots) {
  for (size_t k = 0; k < n; ++k) {
    const int16_t* key = keys + k * subs * D;
    for (size_t p = 0; p < parts; ++p) {
      const int16_t* q = query + p * D;
      for (size_t s = 0; s < subs; ++s) {
        const int16_t* ks = key + s * D;
        int32_t acc = 0;
        for (size_t i = 0; i < D; ++i) acc += int32_t(ks[i]) * int32_t(q[i]);
        dots[(k * parts + p) * subs + s] = acc;
      }
    }
  }
}

#if defined(INFER_KEY_CODES_AVX512)
void coded_dots_avx512(const int16_t* keys, size_t n, size_t subs, const int16_t* query,
                       size_t parts, size_t D, int32_t* dots);
#endif

void coded_dots(const int16_t* keys, size_t n, size_t subs, const int16_t* query, size_t parts,
                size_t D, int32_t* dots) {
#if defined(INFER_KEY_CODES_AVX512)
  static const bool vnni =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni");
  if (vnni && D % 32 == 0) return coded_dots_avx512(keys, n, subs, query, parts, D, dots);
#endif
  coded_dots_base(keys, n, subs, query, parts, D, dots);
}

}  // namespace infer::memory
