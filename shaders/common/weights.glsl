// Weight decode for the matrix-vector family: binding 0 holds W [rows, cols] in one format, read
// in "units" of UNIT weights. A unit is what one invocation decodes per step; unit_col() says
// which columns its weights belong to. Formats (one #define each, set in shaders/meson.build):
//   W_F32   f32, unit = 1 column
//   W_BF16  bf16 (upper half of an f32), unit = 2 columns; 32-bit loads when cols is even
//   W_Q8_0  GGML blocks {fp16 d; int8 qs[32]} (34 bytes), unit = a quarter block, 8 weights
//   W_Q4_0  GGML blocks {fp16 d; uint8 qs[16]} (18 bytes), unit = a quarter block, 8 weights:
//           4 low nibbles (weights 4p..4p+3) and 4 high ones (weights 16+4p..16+4p+3)
// Blocks of 34/18 bytes are only 2-byte aligned, so quantized weights are read as uint16 words.

#if defined(W_F32)
#define UNIT 1
layout(binding = 0, std430) readonly buffer WeightsF32 { float w_f32[]; };

uint units_per_row() { return pc.cols; }
uint unit_col(uint u, uint k) { return u; }
void decode_unit(uint row, uint u, out float w[UNIT]) { w[0] = w_f32[row * pc.cols + u]; }

#elif defined(W_BF16)
#define UNIT 2
layout(binding = 0, std430) readonly buffer WeightsBf16 { uint16_t w_u16[]; };
layout(binding = 0, std430) readonly buffer WeightsBf16Words { uint w_u32[]; };

uint units_per_row() { return (pc.cols + 1) / 2; }
// The second weight of the last unit of an odd row does not exist: its column is clamped (the
// activation read stays in bounds) and its weight decoded as 0.
uint unit_col(uint u, uint k) { return min(2 * u + k, pc.cols - 1); }
void decode_unit(uint row, uint u, out float w[UNIT]) {
  if ((pc.cols & 1u) == 0u) {
    uint v = w_u32[(row * pc.cols) / 2 + u];
    w[0] = uintBitsToFloat(v << 16);
    w[1] = uintBitsToFloat(v & 0xffff0000u);
  } else {
    uint e = row * pc.cols + 2 * u;
    w[0] = uintBitsToFloat(uint(w_u16[e]) << 16);
    w[1] = 2 * u + 1 < pc.cols ? uintBitsToFloat(uint(w_u16[e + 1]) << 16) : 0.0;
  }
}

#elif defined(W_Q8_0)
#define UNIT 8
layout(binding = 0, std430) readonly buffer WeightsQ8 { uint16_t w_u16[]; };
const uint kBlockWords = 17;  // 34 bytes

uint units_per_row() { return pc.cols / 8; }
uint unit_col(uint u, uint k) { return 8 * u + k; }  // block u/4, part u%4: weights 8p..8p+7
void decode_unit(uint row, uint u, out float w[UNIT]) {
  uint block = row * (pc.cols / 32) + u / 4;
  uint base = block * kBlockWords;
  float d = unpackHalf2x16(uint(w_u16[base])).x;
  uint q = base + 1 + 4 * (u % 4);
  for (uint i = 0; i < 4; ++i) {
    int v = int(uint(w_u16[q + i]));
    w[2 * i] = d * float(bitfieldExtract(v, 0, 8));  // bitfieldExtract on int sign-extends
    w[2 * i + 1] = d * float(bitfieldExtract(v, 8, 8));
  }
}

#elif defined(W_Q4_0)
#define UNIT 8
layout(binding = 0, std430) readonly buffer WeightsQ4 { uint16_t w_u16[]; };
const uint kBlockWords = 9;  // 18 bytes

uint units_per_row() { return pc.cols / 8; }
uint unit_col(uint u, uint k) {
  uint p = u % 4;
  return 32 * (u / 4) + (k < 4 ? 4 * p + k : 16 + 4 * p + (k - 4));
}
void decode_unit(uint row, uint u, out float w[UNIT]) {
  uint block = row * (pc.cols / 32) + u / 4;
  uint base = block * kBlockWords;
  float d = unpackHalf2x16(uint(w_u16[base])).x;
  uint q = base + 1 + 2 * (u % 4);
  uint v = uint(w_u16[q]) | (uint(w_u16[q + 1]) << 16);  // qs[4p..4p+3]
  for (uint i = 0; i < 4; ++i) {
    w[i] = d * (float((v >> (8 * i)) & 0xfu) - 8.0);
    w[4 + i] = d * (float((v >> (8 * i + 4)) & 0xfu) - 8.0);
  }
}

#else
#error "define one weight format: W_F32, W_BF16, W_Q8_0 or W_Q4_0"
#endif
