// Weight decode for the matrix-vector family: binding 0 holds W [rows, cols] in one format, read
// in "units" of UNIT weights. A unit is what one invocation decodes per step; unit_col() says
// which columns its weights belong to. Formats (one #define each, set in shaders/meson.build):
//   W_F32   f32, unit = 1 column
//   W_BF16  bf16 (upper half of an f32), unit = 2 columns; 32-bit loads when cols is even
//   W_Q8_0  GGML blocks {fp16 d; int8 qs[32]} (34 bytes), unit = a quarter block, 8 weights
//   W_Q4_0  GGML blocks {fp16 d; uint8 qs[16]} (18 bytes), unit = a quarter block, 8 weights:
//           4 low nibbles (weights 4p..4p+3) and 4 high ones (weights 16+4p..16+4p+3)
// Blocks of 34/18 bytes are only 2-byte aligned, so quantized weights are read as uint16 words.
// The 32 columns of a block are covered by its 4 units, so a 32-aligned column range is covered
// by whole units (the tiled matmul relies on it).
//
// W_PAIR: a second matrix of the same shape and format at binding W_PAIR_BINDING (the gate-up
// fusion); decode_unit_of(m, ...) reads matrix m (0 or 1). Callers pass literal m, so after
// inlining the choice folds away. Without W_PAIR, m must be 0.

#ifdef W_PAIR
#define W_PICK(m, a, b) ((m) == 0u ? (a) : (b))
#else
#define W_PICK(m, a, b) (a)
#endif

#if defined(W_F32)
#define UNIT 1
layout(binding = 0, std430) readonly buffer WeightsF32 { float w_f32[]; };
#ifdef W_PAIR
layout(binding = W_PAIR_BINDING, std430) readonly buffer WeightsF32Pair { float w1_f32[]; };
#endif

uint units_per_row() { return pc.cols; }
uint unit_pos(uint u, uint k) { return u; }
uint unit_col(uint u, uint k) { return u; }
void decode_unit_of(uint m, uint row, uint u, out float w[UNIT]) {
  const uint i = row * pc.cols + u;
  w[0] = W_PICK(m, w_f32[i], w1_f32[i]);
}

#elif defined(W_BF16)
#define UNIT 2
layout(binding = 0, std430) readonly buffer WeightsBf16 { uint16_t w_u16[]; };
layout(binding = 0, std430) readonly buffer WeightsBf16Words { uint w_u32[]; };
#ifdef W_PAIR
layout(binding = W_PAIR_BINDING, std430) readonly buffer WeightsBf16Pair { uint16_t w1_u16[]; };
layout(binding = W_PAIR_BINDING, std430) readonly buffer WeightsBf16PairWords { uint w1_u32[]; };
#endif

uint units_per_row() { return (pc.cols + 1) / 2; }
// Column of weight k of unit u; the last unit of an odd row reaches one past the row (pc.cols),
// where it decodes a 0 weight.
uint unit_pos(uint u, uint k) { return 2 * u + k; }
// unit_pos clamped into the row, so the activation read stays in bounds.
uint unit_col(uint u, uint k) { return min(2 * u + k, pc.cols - 1); }
void decode_unit_of(uint m, uint row, uint u, out float w[UNIT]) {
  if ((pc.cols & 1u) == 0u) {
    const uint i = (row * pc.cols) / 2 + u;
    uint v = W_PICK(m, w_u32[i], w1_u32[i]);
    w[0] = uintBitsToFloat(v << 16);
    w[1] = uintBitsToFloat(v & 0xffff0000u);
  } else {
    uint e = row * pc.cols + 2 * u;
    w[0] = uintBitsToFloat(uint(W_PICK(m, w_u16[e], w1_u16[e])) << 16);
    w[1] = 2 * u + 1 < pc.cols ? uintBitsToFloat(uint(W_PICK(m, w_u16[e + 1], w1_u16[e + 1])) << 16)
                               : 0.0;
  }
}

#elif defined(W_Q8_0)
#define UNIT 8
layout(binding = 0, std430) readonly buffer WeightsQ8 { uint16_t w_u16[]; };
#ifdef W_PAIR
layout(binding = W_PAIR_BINDING, std430) readonly buffer WeightsQ8Pair { uint16_t w1_u16[]; };
#endif
const uint kBlockWords = 17;  // 34 bytes

uint units_per_row() { return pc.cols / 8; }
uint unit_pos(uint u, uint k) { return 8 * u + k; }  // block u/4, part u%4: weights 8p..8p+7
uint unit_col(uint u, uint k) { return 8 * u + k; }
void decode_unit_of(uint m, uint row, uint u, out float w[UNIT]) {
  uint block = row * (pc.cols / 32) + u / 4;
  uint base = block * kBlockWords;
  float d = unpackHalf2x16(uint(W_PICK(m, w_u16[base], w1_u16[base]))).x;
  uint q = base + 1 + 4 * (u % 4);
  for (uint i = 0; i < 4; ++i) {
    int v = int(uint(W_PICK(m, w_u16[q + i], w1_u16[q + i])));
    w[2 * i] = d * float(bitfieldExtract(v, 0, 8));  // bitfieldExtract on int sign-extends
    w[2 * i + 1] = d * float(bitfieldExtract(v, 8, 8));
  }
}

#elif defined(W_Q4_0)
#define UNIT 8
layout(binding = 0, std430) readonly buffer WeightsQ4 { uint16_t w_u16[]; };
#ifdef W_PAIR
layout(binding = W_PAIR_BINDING, std430) readonly buffer WeightsQ4Pair { uint16_t w1_u16[]; };
#endif
const uint kBlockWords = 9;  // 18 bytes

uint units_per_row() { return pc.cols / 8; }
uint unit_pos(uint u, uint k) {
  uint p = u % 4;
  return 32 * (u / 4) + (k < 4 ? 4 * p + k : 16 + 4 * p + (k - 4));
}
uint unit_col(uint u, uint k) { return unit_pos(u, k); }
void decode_unit_of(uint m, uint row, uint u, out float w[UNIT]) {
  uint block = row * (pc.cols / 32) + u / 4;
  uint base = block * kBlockWords;
  float d = unpackHalf2x16(uint(W_PICK(m, w_u16[base], w1_u16[base]))).x;
  uint q = base + 1 + 2 * (u % 4);
  uint lo = uint(W_PICK(m, w_u16[q], w1_u16[q]));
  uint hi = uint(W_PICK(m, w_u16[q + 1], w1_u16[q + 1]));
  uint v = lo | (hi << 16);  // qs[4p..4p+3]
  for (uint i = 0; i < 4; ++i) {
    w[i] = d * (float((v >> (8 * i)) & 0xfu) - 8.0);
    w[4 + i] = d * (float((v >> (8 * i + 4)) & 0xfu) - 8.0);
  }
}

#else
#error "define one weight format: W_F32, W_BF16, W_Q8_0 or W_Q4_0"
#endif

// Matrix 0 (binding 0): what the single-matrix kernels read.
void decode_unit(uint row, uint u, out float w[UNIT]) { decode_unit_of(0u, row, u, w); }
