// bf16 and IEEE fp16 <-> fp32 conversions (scalar; SIMD kernels have their own).
#pragma once

#include <cstdint>
#include <cstring>

namespace infer {

using bf16 = uint16_t;  // the upper 16 bits of an IEEE float32
using fp16 = uint16_t;  // IEEE binary16 (GGML block scales)

inline float bf16_to_f32(bf16 h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even, NaN kept quiet (as torch does).
inline bf16 f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16(u >> 16);
}

inline float fp16_to_f32(fp16 h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do { man <<= 1; ++e; } while ((man & 0x400u) == 0);
      u = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | man << 13;
  } else {
    u = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even, as GGML_FP32_TO_FP16 (F16C) does.
inline fp16 f32_to_fp16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return fp16(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return fp16(sign | 0x7c00u);  // overflow (>= 65520) -> inf
  if (abs < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    if (abs < 0x33000000u) return fp16(sign);  // rounds to zero
    uint32_t e = abs >> 23;
    uint32_t man = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;  // 14 + (113 - e) ... places the leading bit at 2^-24 units
    uint32_t half_man = man >> (shift - 0);
    // round to nearest even on the bits shifted out
    uint32_t rem = man & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_man & 1u))) ++half_man;
    return fp16(sign | half_man);
  }
  uint32_t r = abs + 0xfffu + ((abs >> 13) & 1u) - (uint32_t(127 - 15) << 23);
  return fp16(sign | (r >> 13));
}

}  // namespace infer
