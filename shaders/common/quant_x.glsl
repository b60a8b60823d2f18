// Activations quantized to GGML Q8_0 blocks of 32 on the GPU, bit for bit what the CPU does
// (model/quant.cpp quantize_row_q8_0, model/ops/matmul_avx512_vnni.cpp): d = amax / 127 (IEEE
// division), q = roundf(x * (1 / d)) with the unrounded d, then d rounded to f16 (nearest even).
// Vulkan allows 2.5 ulp for `/`, so the divisions are corrected to the nearest float here; the
// products are made `precise` so no driver fuses them into something more exact than the CPU.

// Correctly rounded a / b (a >= 0 and b > 0 finite): a Newton step from the driver's quotient,
// then of it and its two neighbours the one whose exact residual a - q·b (an fma, exact this
// close to the quotient) is smallest. A quotient is never halfway between two floats.
float div_rn(float a, float b) {
  precise float q = a / b;
  precise float r = fma(-q, b, a);
  q = fma(r, 1.0 / b, q);
  const uint u = floatBitsToUint(q);
  precise const float lo = uintBitsToFloat(max(u, 1u) - 1u), hi = uintBitsToFloat(u + 1u);
  precise const float r_lo = abs(fma(-lo, b, a)), r_q = abs(fma(-q, b, a)),
                      r_hi = abs(fma(-hi, b, a));
  if (r_lo < r_q && r_lo <= r_hi) return lo;
  return r_hi < r_q ? hi : q;
}

// roundf: to nearest, halves away from zero (GLSL's round() leaves halves to the driver).
// v - trunc(v) is exact.
float round_away(float v) {
  precise const float t = trunc(v);
  precise const float f = abs(v - t);
  return f >= 0.5 ? t + sign(v) : t;
}

// d rounded to f16 and back, nearest even (base/half.h f32_to_fp16), for 0 <= d < 65520: normal
// halves by rounding away 13 mantissa bits, subnormal ones (below 2^-14) to a multiple of 2^-24.
float round_f16(float d) {
  if (d < 6.103515625e-5) return roundEven(d * 16777216.0) * 5.9604644775390625e-8;
  const uint u = floatBitsToUint(d);
  return uintBitsToFloat((u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu);
}

// One block of 32 activations `v` -> the block's 8 quads as packed int8 words (byte e of word k
// = column 4k + e) and its f16-rounded scale.
float quantize_block(vec4 v[8], out uint words[8]) {
  float amax = 0.0;
  for (uint k = 0; k < 8; ++k) {
    const vec4 a = abs(v[k]);
    amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
  }
  const float d = div_rn(amax, 127.0);
  const float id = d != 0.0 ? div_rn(1.0, d) : 0.0;
  for (uint k = 0; k < 8; ++k) {
    precise const vec4 s = v[k] * id;
    const ivec4 q = ivec4(round_away(s.x), round_away(s.y), round_away(s.z), round_away(s.w));
    words[k] = (uint(q.x) & 0xffu) | ((uint(q.y) & 0xffu) << 8) | ((uint(q.z) & 0xffu) << 16) |
               (uint(q.w) << 24);
  }
  return round_f16(d);
}

// Quantizes the 32 floats src[first .. first + 31] (an array the includer holds: shared memory)
// and writes them in coop_x_prep.comp's INT8 layout: their 8 words to words[word0 .. word0 + 7]
// and their scale to scales[scale_at]. A macro: GLSL functions take no arrays of the caller's
// storage.
#define QUANT_X_STORE_BLOCK(src, first, words, word0, scales, scale_at)                     \
  {                                                                                          \
    vec4 qx_v[8];                                                                            \
    for (uint qx_k = 0; qx_k < 8; ++qx_k) {                                                  \
      const uint qx_c = (first) + 4 * qx_k;                                                  \
      qx_v[qx_k] = vec4(src[qx_c], src[qx_c + 1], src[qx_c + 2], src[qx_c + 3]);            \
    }                                                                                        \
    uint qx_words[8];                                                                        \
    const float qx_d = quantize_block(qx_v, qx_words);                                       \
    for (uint qx_k = 0; qx_k < 8; ++qx_k) words[(word0) + qx_k] = qx_words[qx_k];           \
    scales[scale_at] = qx_d;                                                                 \
  }
