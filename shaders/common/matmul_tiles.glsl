// Tile staging for shaders/matmul.comp: one "quad" (4 consecutive columns of a weight row) of a
// 32-column step, loaded as raw words and decoded later, per format of common/weights.glsl
// (included first; its layout comment is the reference for the indices below).
// A step starts at column c0, a multiple of 32, and holds quads u < 8 (columns c0 + 4u + e):
//   W_F32   quad u is vector c0/4 + u (zero past cols: the row is padded to 4 columns only)
//   W_BF16  words 2h, 2h + 1 of vector 8 (c0/64) + u, h = (c0/32) % 2: one 8-byte load
//   W_Q8_0  word q = (c0%256)/64 of vector 16 G + 8h + u (G = c0/256), block 2q + h: the scale
//           is half h of word q of the group's scale vector
//   W_Q4_0  word w = (c0%256)/64 of vector 8 G + u, nibbles h: block 2w + h, scale half h of
//           word w of the group's scale vector
// Quantized rows are a whole number of 32-column blocks, so a step never leaves the row; bf16
// rows pad to 64 columns, so neither does theirs. Lanes take neighbouring quads of a row: their
// loads fall in one 128-byte span, and the words a step leaves are the next steps' (L1 hits).
// Everything here is shifts and masks of uniform values: no division by a runtime count.

#ifdef W_BF16
layout(binding = 0, std430) readonly buffer WeightsV2 { uvec2 w_v2[]; };
#ifdef W_PAIR
layout(binding = W_PAIR_BINDING, std430) readonly buffer WeightsPairV2 { uvec2 w1_v2[]; };
#endif
#endif

// The raw words of quad u of the step at c0 in the row of matrix m whose first vector is rv
// (row * w_stride()): f32 its 4 floats, bf16 its 2 words, Q8_0/Q4_0 its quant word and its
// block's scale word.
uvec4 tile_quad_raw(uint m, uint rv, uint c0, uint u) {
#if defined(W_F32)
  if (c0 + 4u * u >= pc.cols) return uvec4(0u);
  const uint i = rv + c0 / 4u + u;
  return W_PICK(m, w_v4[i], w1_v4[i]);
#elif defined(W_BF16)
  const uint i = 2u * (rv + 8u * (c0 / 64u) + u) + (c0 / 32u) % 2u;
  return uvec4(W_PICK(m, w_v2[i], w1_v2[i]), 0u, 0u);
#elif defined(W_Q8_0)
  const uint g = c0 / 256u, q = (c0 % 256u) / 64u;
  const uint wi = (rv + 16u * g + 8u * ((c0 / 32u) % 2u) + u) * 4u + q;
  const uint si = (rv + 16u * w_groups() + g) * 4u + q;
  return uvec4(word_of(m, wi), word_of(m, si), 0u, 0u);
#else
  const uint g = c0 / 256u, w = (c0 % 256u) / 64u;
  const uint wi = (rv + 8u * g + u) * 4u + w;
  const uint si = (rv + 8u * w_groups() + g) * 4u + w;
  return uvec4(word_of(m, wi), word_of(m, si), 0u, 0u);
#endif
}

// The quad's 4 weights from its raw words (tile_quad_raw of the step at c0), exactly as the CPU
// dequantizes them: bf16 shifted, (q - bias) * d in f32 (a product of an int of <= 8 bits and
// an f16 scale, so exact).
vec4 tile_quad_decode(uvec4 raw, uint c0) {
#if defined(W_F32)
  return uintBitsToFloat(raw);
#elif defined(W_BF16)
  return uintBitsToFloat(uvec4(raw.x << 16, raw.x & 0xffff0000u, raw.y << 16,
                               raw.y & 0xffff0000u));
#elif defined(W_Q8_0)
  const uint v = raw.x ^ 0x80808080u;  // int8 -> uint8 biased by 128
  // Block 2q + h: half h of the scale word, converted alone.
  const float d = unpackHalf2x16(raw.y >> ((c0 & 32u) / 2u)).x;
  return d * vec4(magic_int(v & 0xffu, 128.0), magic_int((v >> 8) & 0xffu, 128.0),
                  magic_int((v >> 16) & 0xffu, 128.0), magic_int(v >> 24, 128.0));
#else
  // One mask leaves each weight a whole byte: 4 byte extracts (single instructions on NVIDIA).
  const uint v = (raw.x >> ((c0 & 32u) / 8u)) & 0x0f0f0f0fu;
  const float d = unpackHalf2x16(raw.y >> ((c0 & 32u) / 2u)).x;
  return d * vec4(magic_int(v & 0xffu, 8.0), magic_int((v >> 8) & 0xffu, 8.0),
                  magic_int((v >> 16) & 0xffu, 8.0), magic_int(v >> 24, 8.0));
#endif
}
