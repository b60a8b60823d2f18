// Weight decode for the matrix families: binding 0 holds W [rows, cols] in the device layout that
// gpu/ops/matvec.cpp (repack_rows) writes at upload, one #define per format (shaders/meson.build).
// Every row is a whole number of 16-byte vectors (uvec4), W_STRIDE of them, so a lane reads its
// weights with 128-bit loads. A row's quant vectors come first; vector j holds VEC_QUADS "quads"
// (4 consecutive columns each), quad q at column vec_quad_col(j, q). Quads interleave so that
// lane j of a subgroup reading quad q of vector j reads x at 16-byte steps: a subgroup's x loads
// of one quad cover whole 128-byte lines.
//   W_F32   vector = 4 f32, columns 4j..4j+3; row padded with zeros to 4 columns
//   W_BF16  vector = 8 bf16 (low half of each word first); groups of 64 columns, 8 vectors:
//           vector g of group G holds columns 64G + 32q + 4g + e (q < 2, word 2q + e/2)
//   W_Q8_0  groups of 256 columns (8 GGML blocks), 16 vectors: vector g holds int8 quants of
//           columns 256G + 64q + 4g + e (q < 4, byte e of word q), block 2q + g/8
//   W_Q4_0  groups of 256 columns, 8 vectors: vector g holds 4-bit quants (q + 8 as stored by
//           GGML) of columns 256G + 32q + 4g + e (q < 8, bits 8e + 4(q%2) of word q/2), block q:
//           masking a word with 0x0f0f0f0f (after >> 4 for odd q) gives a quad as packed bytes
// Q8_0/Q4_0 rows end with one vector per group holding its 8 block scales (f16, block b in half
// b). Columns past cols (the last group's padding) have zero weights (scale 0), so a reader may
// multiply them with any finite activation.
//
// W_PAIR: a second matrix of the same shape and format at binding W_PAIR_BINDING (the gate-up
// fusion); the *_of(m, ...) functions read matrix m (0 or 1). Callers pass literal m, so after
// inlining the choice folds away. Without W_PAIR, m must be 0.

#ifdef W_PAIR
#define W_PICK(m, a, b) ((m) == 0u ? (a) : (b))
#else
#define W_PICK(m, a, b) (a)
#endif

layout(binding = 0, std430) readonly buffer WeightsV4 { uvec4 w_v4[]; };
layout(binding = 0, std430) readonly buffer WeightsU32 { uint w_u32[]; };
#ifdef W_PAIR
layout(binding = W_PAIR_BINDING, std430) readonly buffer WeightsPairV4 { uvec4 w1_v4[]; };
layout(binding = W_PAIR_BINDING, std430) readonly buffer WeightsPairU32 { uint w1_u32[]; };
#endif

// (M + n) as f32 bits is exact for n < 2^23; subtracting M + bias gives n - bias exactly, without
// an integer-to-float conversion (a quarter-rate instruction on NVIDIA).
const float kMagic = 8388608.0;  // 2^23
float magic_int(uint bits, float bias) { return uintBitsToFloat(0x4B000000u | bits) - (kMagic + bias); }

#if defined(W_F32)
#define UNIT 1       // columns per invocation of element-wise readers (embed.comp)
#define VEC_QUADS 1  // quads of 4 columns per vector
#define VEC_UNROLL 4  // vectors a lane loads before using any (matvec.comp's default UNROLL)
uint w_vecs() { return (pc.cols + 3) / 4; }
uint w_stride() { return w_vecs(); }
uint vec_quad_col(uint j, uint q) { return 4 * j; }

#elif defined(W_BF16)
#define UNIT 2
#define VEC_QUADS 2
#define VEC_UNROLL 4
uint w_vecs() { return (pc.cols + 63) / 64 * 8; }
uint w_stride() { return w_vecs(); }
uint vec_quad_col(uint j, uint q) { return 64 * (j / 8) + 32 * q + 4 * (j % 8); }

#elif defined(W_Q8_0)
#define UNIT 8
#define VEC_QUADS 4
#define VEC_UNROLL 2
#define W_SCALED
#define GROUP_VECS 16  // quant vectors a group (one scale vector)
uint w_groups() { return (pc.cols + 255) / 256; }
uint w_vecs() { return w_groups() * GROUP_VECS; }
uint w_stride() { return w_groups() * 17; }
uint vec_quad_col(uint j, uint q) { return 256 * (j / 16) + 64 * q + 4 * (j % 16); }

#elif defined(W_Q4_0)
#define UNIT 8
#define VEC_QUADS 8
#define VEC_UNROLL 2
#define W_SCALED
#define GROUP_VECS 8
uint w_groups() { return (pc.cols + 255) / 256; }
uint w_vecs() { return w_groups() * GROUP_VECS; }
uint w_stride() { return w_groups() * 9; }
uint vec_quad_col(uint j, uint q) { return 256 * (j / 8) + 32 * q + 4 * (j % 8); }

#else
#error "define one weight format: W_F32, W_BF16, W_Q8_0 or W_Q4_0"
#endif

// Vector j (< w_vecs()) of row `row` of matrix m, and the scale vector of its group (Q8_0/Q4_0).
uvec4 load_vec_of(uint m, uint row, uint j) {
  const uint i = row * w_stride() + j;
  return W_PICK(m, w_v4[i], w1_v4[i]);
}
uvec4 load_scales_of(uint m, uint row, uint j) {
#ifdef W_SCALED
  // GROUP_VECS a literal: the division is a shift, not the integer division that
  // w_vecs() / w_groups() would cost every load.
  const uint i = row * w_stride() + w_vecs() + j / GROUP_VECS;
  return W_PICK(m, w_v4[i], w1_v4[i]);
#else
  return uvec4(0);
#endif
}

// v[i] for a runtime i, as selects: a dynamically indexed vector can land in local memory on
// NVIDIA (matmul.comp's staging indexes by a computed quad); constant i folds away.
uint pick4(uvec4 v, uint i) { return i == 0u ? v.x : i == 1u ? v.y : i == 2u ? v.z : v.w; }

// The unsigned field of `width` bits at bit p of v, minus bias, exactly, as f32 (p + width <= 23).
// Masked in place and given the exponent of 2^(23 - p), the word reads 2^(23 - p) + field: one
// masked OR (a single LOP3 on NVIDIA) and one add, where extracting the field first (a shift and
// a mask, or a byte extract, per weight) took twice the integer instructions. On the H200,
// against the extract-first decode: 12B Q4_0 decode 166.6 vs 160.4 t/s, E2B Q4_0 274-277 vs 268,
// E2B Q8_0 262.1 vs 259.7.
float field_int(uint v, uint p, uint width, float bias) {
  const uint mask = ((1u << width) - 1u) << p;
  return uintBitsToFloat((v & mask) | ((150u - p) << 23)) - (float(1u << (23u - p)) + bias);
}

// The 4 weights of quad q of vector j (wv, with its group's scales sv), undecoded scale aside:
// returns (weights, scale) so dot products apply the scale once per quad.
vec4 quad_weights(uvec4 wv, uint j, uint q) {
#if defined(W_F32)
  return uintBitsToFloat(wv);
#elif defined(W_BF16)
  const uint a = pick4(wv, 2 * q), b = pick4(wv, 2 * q + 1);
  return uintBitsToFloat(uvec4(a << 16, a & 0xffff0000u, b << 16, b & 0xffff0000u));
#elif defined(W_Q8_0)
  const uint v = pick4(wv, q) ^ 0x80808080u;  // int8 -> uint8 biased by 128
  const uint hi = v >> 16;  // bytes 2 and 3 at bits 0 and 8 (bit 23 is the exponent's)
  return vec4(field_int(v, 0u, 8u, 128.0), field_int(v, 8u, 8u, 128.0),
              field_int(hi, 0u, 8u, 128.0), field_int(hi, 8u, 8u, 128.0));
#else
  // Quad q's weights are the nibbles at bits 8e + 4(q % 2) of word q / 2; those at bit 20 and up
  // move down by 12 (one shift a word, shared by its two quads).
  const uint v = pick4(wv, q / 2), hi = v >> 12;
  if ((q % 2) == 0u) {
    return vec4(field_int(v, 0u, 4u, 8.0), field_int(v, 8u, 4u, 8.0),
                field_int(v, 16u, 4u, 8.0), field_int(hi, 12u, 4u, 8.0));
  }
  return vec4(field_int(v, 4u, 4u, 8.0), field_int(v, 12u, 4u, 8.0),
              field_int(hi, 8u, 4u, 8.0), field_int(hi, 16u, 4u, 8.0));
#endif
}
float quad_scale(uvec4 sv, uint j, uint q) {
#if defined(W_Q8_0)
  // Block 2q + (j % 16) / 8: one half of word q, converted alone.
  return unpackHalf2x16(pick4(sv, q) >> (16u * ((j % 16u) / 8u))).x;
#elif defined(W_Q4_0)
  const vec2 d = unpackHalf2x16(pick4(sv, q / 2));  // blocks q & ~1, q | 1
  return (q % 2) == 0 ? d.x : d.y;
#else
  return 1.0;
#endif
}

// Σ over the vector's weights times the activations xq[q] of its quads.
float vec_dot(uvec4 wv, uvec4 sv, uint j, vec4 xq[VEC_QUADS]) {
  float s = 0.0;
  for (uint q = 0; q < VEC_QUADS; ++q) {
#ifdef W_SCALED
    s += quad_scale(sv, j, q) * dot(quad_weights(wv, j, q), xq[q]);
#else
    s += dot(quad_weights(wv, j, q), xq[q]);
#endif
  }
  return s;
}

// Where quad c (columns c..c+3) sits: its vector j and quad q within the vector.
uvec2 quad_place(uint c) {
#if defined(W_F32)
  return uvec2(c / 4, 0);
#elif defined(W_BF16)
  return uvec2(8 * (c / 64) + (c % 32) / 4, (c % 64) / 32);
#elif defined(W_Q8_0)
  return uvec2(16 * (c / 256) + (c % 64) / 4, (c % 256) / 64);
#else
  return uvec2(8 * (c / 256) + (c % 32) / 4, (c % 256) / 32);
#endif
}

uint word_of(uint m, uint i) { return W_PICK(m, w_u32[i], w1_u32[i]); }

#ifdef W_SCALED
// Q8_0/Q4_0: the quant word of quad c (quad_raw_of's first) alone, for a reader that loads each
// block's scale once (block_scale_of) rather than with every quad.
uint quad_word_of(uint m, uint row, uint c) {
  const uvec2 jq = quad_place(c);
  const uint v = (row * w_stride() + jq.x) * 4;
#if defined(W_Q8_0)
  return word_of(m, v + jq.y);
#else
  return word_of(m, v + jq.y / 2);
#endif
}
#endif

// The words the quad of matrix m, row `row`, columns c..c+3 decodes from, loaded but not decoded:
// f32 its 4 floats, bf16 its 2 words, Q8_0/Q4_0 its quant word and its scale word. A caller can
// issue many such loads before decoding any (quad_from_raw), so their latencies overlap.
uvec4 quad_raw_of(uint m, uint row, uint c) {
  const uvec2 jq = quad_place(c);
  const uint v = (row * w_stride() + jq.x) * 4;  // first word of vector j
#if defined(W_F32)
  return uvec4(word_of(m, v), word_of(m, v + 1), word_of(m, v + 2), word_of(m, v + 3));
#elif defined(W_BF16)
  return uvec4(word_of(m, v + 2 * jq.y), word_of(m, v + 2 * jq.y + 1), 0, 0);
#else
  const uint s = (row * w_stride() + w_vecs() + jq.x / GROUP_VECS) * 4;
#if defined(W_Q8_0)
  return uvec4(quad_word_of(m, row, c), word_of(m, s + jq.y), 0, 0);
#else
  return uvec4(quad_word_of(m, row, c), word_of(m, s + jq.y / 2), 0, 0);
#endif
#endif
}

#ifdef W_SCALED
// Q8_0/Q4_0: the scale of the block holding column c (quad_raw_of's second word, decoded as
// quad_d_from_raw does).
float block_scale_of(uint m, uint row, uint c) {
  const uvec2 jq = quad_place(c);
  const uint s = (row * w_stride() + w_vecs() + jq.x / GROUP_VECS) * 4;
#if defined(W_Q8_0)
  const vec2 d = unpackHalf2x16(word_of(m, s + jq.y));
  return (jq.x % 16) < 8 ? d.x : d.y;
#else
  const vec2 d = unpackHalf2x16(word_of(m, s + jq.y / 2));
  return (jq.y % 2) == 0 ? d.x : d.y;
#endif
}
#endif

// The quants of a quad from its raw words (quad_raw_of): Q8_0/Q4_0 the integers q - bias; f32 and
// bf16 the weights themselves.
vec4 quad_q_from_raw(uvec4 raw, uint c) {
#if defined(W_F32)
  return uintBitsToFloat(raw);
#elif defined(W_BF16)
  return uintBitsToFloat(uvec4(raw.x << 16, raw.x & 0xffff0000u, raw.y << 16,
                               raw.y & 0xffff0000u));
#elif defined(W_Q8_0)
  const uint v = raw.x ^ 0x80808080u;
  return vec4(magic_int(v & 0xffu, 128.0), magic_int((v >> 8) & 0xffu, 128.0),
              magic_int((v >> 16) & 0xffu, 128.0), magic_int(v >> 24, 128.0));
#else
  const uint v = raw.x >> (4 * (quad_place(c).y % 2));
  return vec4(magic_int(v & 0xfu, 8.0), magic_int((v >> 8) & 0xfu, 8.0),
              magic_int((v >> 16) & 0xfu, 8.0), magic_int((v >> 24) & 0xfu, 8.0));
#endif
}

// The scale of the quad's block (1 for f32 and bf16).
float quad_d_from_raw(uvec4 raw, uint c) {
#if defined(W_Q8_0)
  const vec2 d = unpackHalf2x16(raw.y);
  return (quad_place(c).x % 16) < 8 ? d.x : d.y;
#elif defined(W_Q4_0)
  const vec2 d = unpackHalf2x16(raw.y);
  return (quad_place(c).y % 2) == 0 ? d.x : d.y;
#else
  return 1.0;
#endif
}

// The 4 weights of a quad from its raw words (quad_raw_of).
vec4 quad_from_raw(uvec4 raw, uint c) {
#ifdef W_SCALED
  return quad_d_from_raw(raw, c) * quad_q_from_raw(raw, c);
#else
  return quad_q_from_raw(raw, c);
#endif
}

// The 4 weights of matrix m, row `row`, columns c..c+3 (c % 4 == 0, c < the padded row): the
// element-wise readers' (tiled matmul, embed, router) view of the layout.
vec4 decode_quad_of(uint m, uint row, uint c) { return quad_from_raw(quad_raw_of(m, row, c), c); }

// Weight (row, c) of matrix 0, c < cols.
float weight_at(uint row, uint c) { return decode_quad_of(0u, row, c & ~3u)[c & 3u]; }
