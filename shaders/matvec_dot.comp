// Matrix-vector (T = 1) and small-T product for Q8_0/Q4_0 weights with integer dot products:
// activations are quantized to Q8_0 blocks of 32 (common/quant_x.glsl: the CPU's bits), so each
// quad of 4 weights costs one 4 x int8 dot product (OpSDot) instead of 4 decodes and 4 fmas.
//   W: binding 0, [rows, cols] Q8_0 or Q4_0 in the device layout (common/weights.glsl)
//   x: binding 1, [n_tokens, x_stride] f32 (x_stride % 4 == 0)   y: binding 2, like matvec.comp
//   GATE_UP only: binding 3, the up matrix; y = gelu(gate · x) · (up · x)
//   push: MatvecPush (matvec.h). spec: as matvec.comp, plus GROUPS: the 256-column groups of x
//   per token the shared memory holds (the host runs this kernel only for cols <= 256 · GROUPS).
// X_PREPPED: x comes quantized (binding 1: shaders/coop_x_prep.comp's X_Q8 output, the int8
// quads as words [n_tokens][cols / 4], then the f32 scales [n_tokens][cols / 32]) by a dispatch
// before, once for every workgroup, so there is no prologue. Otherwise:
// Every workgroup first quantizes its tokens of x into shared memory, one block per invocation,
// stored in the weights' interleaved order (lane j reads its vector's quads as one or two 16-byte
// shared loads, no bank conflicts); x is read by every workgroup anyway, and quantizing here
// saves a dispatch (decode is launch-bound on small models); each lane's first weight loads are
// issued before it, to overlap. Then rows go to subgroups as in
// matvec.comp: lane l takes vectors l, l + S, ..., ROWS rows (x2 for gate-up) at a time, and each
// quad's int sum meets its two scales in f32: y = sum over blocks of dot · d_w · d_x.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_spirv_intrinsics : require
#extension GL_KHR_memory_scope_semantics : require

#include "matvec.h"

layout(local_size_x_id = INFER_MATVEC_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_MATVEC_SPEC_ROWS) const uint kRows = 1;
layout(constant_id = INFER_MATVEC_SPEC_TOKENS) const uint kTokens = 1;
layout(constant_id = INFER_MATVEC_SPEC_SUBGROUPS) const uint kSubgroups = 1;
layout(constant_id = INFER_MATVEC_DOT_SPEC_GROUPS) const uint kGroups = 1;

#ifdef X_PREPPED
layout(binding = 1, std430) readonly buffer XQ { uint xq_words[]; };
layout(binding = 1, std430) readonly buffer XD { float xq_scales[]; };
#else
layout(binding = 1, std430) readonly buffer X4 { vec4 x4[]; };
#endif
#ifdef X8_OUT
layout(binding = 2, std430) coherent buffer Y { float y[]; };  // read back: see arrive_x8
#else
layout(binding = 2, std430) writeonly buffer Y { float y[]; };
#endif

#ifdef GATE_UP
#define W_PAIR
#define W_PAIR_BINDING INFER_MATVEC_BINDING_UP
const uint kMats = 2;  // gate, then up
#include "common/gelu.glsl"
#else
const uint kMats = 1;
#endif
#include "common/weights.glsl"
#ifndef X_PREPPED
#include "common/quant_x.glsl"
#endif

#if !defined(W_Q8_0) && !defined(W_Q4_0)
#error "matvec_dot.comp takes W_Q8_0 or W_Q4_0"
#endif

// OpSDot (SPV_KHR_integer_dot_product, core in SPIR-V 1.6) on 4 x int8 packed in a uint
// (PackedVectorFormat4x8Bit = 0); capabilities DotProductInput4x8BitPacked and DotProduct.
// Debian's glslc predates GL_EXT_integer_dot_product, so it is declared by opcode.
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6018, 6019],
                  id = 4450)
int sdot(uint a, uint b, spirv_literal int packed_format);

// (M + n) as f32 bits is exactly M + n for |n| < 2^22 with M = 1.5 · 2^23: an int sum becomes a
// float with an integer add (folded into the dot product's accumulator) and one f32 subtraction
// instead of a quarter-rate conversion. A block dot is at most 32 · 128 · 127 < 2^22.
const int kMagicBits = 0x4B400000;
const float kMagicF = 12582912.0;

const uint kLoads = kMats * VEC_UNROLL * kRows;  // weight vectors in flight per lane

#ifdef X8_OUT
// Gate-up, T = 1: y also quantized as coop_x_prep.comp's X_Q8 writes it (binding 4: int8 quads
// [rows / 4], then f32 scales [rows / 32]; rows % 32 == 0), the down projection's x, so that it
// needs no dispatch of its own to quantize it. A subgroup's ROWS rows lie in one block of 32 (ROWS
// divides 32: the host's choice); the lane that writes them counts them in on the block's counter
// (binding 5, zero between dispatches), and the one that completes the block reads its 32 values
// back and quantizes it. Release on every arrival, acquire only on the last (a fence after its
// atomic). On the H200 (12B Q4_0, docs/bench/gpu-h200-s18-call2.json) gate-up takes 31.7 us so
// against 26.2 + 5.2 for the plain kernel and the down projection's prep dispatch: a tie, so it
// stays opt-in (INFER_X8_GATE_UP=1). Earlier forms were slower: a counter a workgroup with a
// device-scope acquire in every one 33.6 us (call 1), whole blocks a 512-invocation workgroup
// 32.9 (session 17).
#if !defined(GATE_UP) || !defined(X_PREPPED)
#error "X8_OUT takes GATE_UP and X_PREPPED"
#endif
layout(binding = 4, std430) writeonly buffer Y8Q { uint y8_words[]; };
layout(binding = 4, std430) writeonly buffer Y8D { float y8_scales[]; };
layout(binding = 5, std430) coherent buffer Counters { uint block_counters[]; };
#include "common/quant_x.glsl"

// By the lane that wrote rows row0 .. row0 + ROWS - 1 of y, after writing them.
void arrive_x8(uint row0) {
  const uint block = row0 / 32;
  const uint before = atomicAdd(block_counters[block], 1u, gl_ScopeDevice,
                                gl_StorageSemanticsBuffer, gl_SemanticsRelease);
  if (before != 32 / kRows - 1) return;
  // The block's last rows: every other arrival's writes made visible, the counter reset for the
  // next dispatch (ordered after this one by the recorder's barrier), the block quantized.
  memoryBarrier(gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsAcquire);
  atomicStore(block_counters[block], 0u, gl_ScopeDevice, gl_StorageSemanticsBuffer,
              gl_SemanticsRelaxed);
  float vals[32];
  for (uint i = 0; i < 32; ++i) vals[i] = y[32 * block + i];
  QUANT_X_STORE_BLOCK(vals, 0, y8_words, 8 * block, y8_scales, pc.rows / 4 + block);
}
#endif

#ifdef X_PREPPED
// The prepared x of quad c (columns c..c+3) and of its block, token t; columns past cols (the
// last group's padding, zero weights) read the last quad, any finite value.
uint x_word(uint t, uint c) { return xq_words[t * (pc.cols / 4) + min(c, pc.cols - 4) / 4]; }
float x_scale(uint t, uint c) {
  return xq_scales[pc.n_tokens * (pc.cols / 4) + t * (pc.cols / 32) + min(c, pc.cols - 4) / 32];
}
#else
// Shared x, per token: 16 uvec4 of quads a 256-column group in weight order (Q8_0: vector j's 4
// quads at [j]; Q4_0: its 8 at [2j], [2j + 1]) and 8 block scales (2 vec4) a group.
shared uvec4 xs_q[kTokens * kGroups * 16];
shared vec4 xs_d[kTokens * kGroups * 2];

// Block b (of the row, b < 8 · w_groups()) of token slot t: quantized from x, or zeros past cols.
void quantize_to_shared(uint t, uint xb, uint b) {
  vec4 v[8];
  for (uint k = 0; k < 8; ++k) v[k] = vec4(0.0);
  if (32 * b < pc.cols) {
    for (uint k = 0; k < 8; ++k) v[k] = x4[(xb + 32 * b) / 4 + k];
  }
  uint words[8];
  const float d = quantize_block(v, words);
  const uint base = t * kGroups * 16;
  for (uint k = 0; k < 8; ++k) {
    const uvec2 jq = quad_place(32 * b + 4 * k);  // vector, quad within it
#if defined(W_Q8_0)
    xs_q[base + jq.x][jq.y] = words[k];
#else
    xs_q[base + 2 * jq.x + jq.y / 4][jq.y % 4] = words[k];
#endif
  }
  xs_d[t * kGroups * 2 + b / 4][b % 4] = d;
}

#endif

// The activations of vector jc of token t (the token itself with X_PREPPED, else its slot in
// the workgroup): Q8_0 its 4 quads (xw) and their block scales (dx); Q4_0 its 8 quads (xw0 0-3,
// xw1 4-7) and their block scales (dx0, dx1), quad q being block q of the group.
#if defined(W_Q8_0)
void load_x_vec(uint t, uint jc, out uvec4 xw, out vec4 dx) {
#ifdef X_PREPPED
  for (uint q = 0; q < 4; ++q) {
    const uint c = vec_quad_col(jc, q);
    xw[q] = x_word(t, c);
    dx[q] = x_scale(t, c);
  }
#else
  xw = xs_q[t * kGroups * 16 + jc];
  const vec4 da = xs_d[t * kGroups * 2 + 2 * (jc / 16)],
             db = xs_d[t * kGroups * 2 + 2 * (jc / 16) + 1];
  // Quad q is block 2q + (jc % 16) / 8 of the group.
  dx = (jc % 16) < 8 ? vec4(da.x, da.z, db.x, db.z) : vec4(da.y, da.w, db.y, db.w);
#endif
}
#else
void load_x_vec(uint t, uint jc, out uvec4 xw0, out uvec4 xw1, out vec4 dx0, out vec4 dx1) {
#ifdef X_PREPPED
  for (uint q = 0; q < 4; ++q) {
    const uint c0 = vec_quad_col(jc, q), c1 = vec_quad_col(jc, q + 4);
    xw0[q] = x_word(t, c0);
    xw1[q] = x_word(t, c1);
    dx0[q] = x_scale(t, c0);
    dx1[q] = x_scale(t, c1);
  }
#else
  xw0 = xs_q[t * kGroups * 16 + 2 * jc];
  xw1 = xs_q[t * kGroups * 16 + 2 * jc + 1];
  dx0 = xs_d[t * kGroups * 2 + 2 * (jc / 8)];
  dx1 = xs_d[t * kGroups * 2 + 2 * (jc / 8) + 1];
#endif
}
#endif

// The weight vectors (and their groups' scales) of one step of a lane: VEC_UNROLL vectors from
// j0 at subgroup stride, of each row and matrix; a vector past the row repeats the last (its sum
// is dropped).
void load_step(uint row0, uint j0, inout uvec4 wv[kLoads], inout uvec4 sv[kLoads]) {
  for (uint u = 0; u < VEC_UNROLL; ++u) {
    const uint j = min(j0 + u * gl_SubgroupSize, w_vecs() - 1);
    for (uint m = 0; m < kMats; ++m) {
      for (uint r = 0; r < kRows; ++r) {
        const uint row = min(row0 + r, pc.rows - 1);  // rows past the end repeat the last
        wv[(m * VEC_UNROLL + u) * kRows + r] = load_vec_of(m, row, j);
        sv[(m * VEC_UNROLL + u) * kRows + r] = load_scales_of(m, row, j);
      }
    }
  }
}

void main() {
  const uint lanes = gl_SubgroupSize, lane = gl_SubgroupInvocationID;
  const uint group = gl_WorkGroupID.z * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  const uint t0 = gl_WorkGroupID.y * kTokens;
  const uint n_vecs = w_vecs();

  // The first step's weights are loaded before x is quantized, so that their latency (DRAM) and
  // the quantization (ALU, L2 reads of x) overlap instead of adding up.
  uvec4 wv[kLoads], sv[kLoads];
  const uint first_row0 = (group * kSubgroups + gl_SubgroupID) * kRows;
  if (gl_SubgroupID < kSubgroups && first_row0 < pc.rows) load_step(first_row0, lane, wv, sv);

#ifndef X_PREPPED
  const uint n_blocks = 8 * w_groups();
  for (uint i = gl_LocalInvocationIndex; i < kTokens * n_blocks; i += gl_WorkGroupSize.x) {
    const uint t = i / n_blocks;
    quantize_to_shared(t, min(t0 + t, pc.n_tokens - 1) * pc.x_stride, i % n_blocks);
  }
  barrier();
#endif

  for (uint slot = gl_SubgroupID; slot < kSubgroups; slot += gl_NumSubgroups) {
    const uint row0 = (group * kSubgroups + slot) * kRows;
    if (row0 >= pc.rows) break;  // uniform in the subgroup

    float acc[kMats * kRows * kTokens];
    for (uint i = 0; i < kMats * kRows * kTokens; ++i) acc[i] = 0.0;

    for (uint j0 = lane; j0 < n_vecs; j0 += VEC_UNROLL * lanes) {
      if (slot != gl_SubgroupID || j0 != lane) load_step(row0, j0, wv, sv);
      for (uint u = 0; u < VEC_UNROLL; ++u) {
        const uint j = j0 + u * lanes;
        const float keep = j < n_vecs ? 1.0 : 0.0;
        const uint jc = min(j, n_vecs - 1);
        for (uint t = 0; t < kTokens; ++t) {
          // The activations of vector jc: VEC_QUADS packed quads, their block scales, and (Q4_0)
          // the magic bits less 8 · the quad's sum, which takes GGML's q + 8 storage back to q.
#ifdef X_PREPPED
          const uint xt = min(t0 + t, pc.n_tokens - 1);
#else
          const uint xt = t;
#endif
#if defined(W_Q8_0)
          uvec4 xw;
          vec4 dx;
          load_x_vec(xt, jc, xw, dx);
#else
          uvec4 xw0, xw1;
          vec4 dx0, dx1;
          load_x_vec(xt, jc, xw0, xw1, dx0, dx1);
          int base[8];
          for (uint q = 0; q < 4; ++q) {
            base[q] = kMagicBits + sdot(pick4(xw0, q), 0xf8f8f8f8u, 0);
            base[4 + q] = kMagicBits + sdot(pick4(xw1, q), 0xf8f8f8f8u, 0);
          }
#endif
          for (uint m = 0; m < kMats; ++m) {
            for (uint r = 0; r < kRows; ++r) {
              const uint i = (m * VEC_UNROLL + u) * kRows + r;
              float s = 0.0;
#if defined(W_Q8_0)
              for (uint q = 0; q < 4; ++q) {
                const float dot = intBitsToFloat(kMagicBits + sdot(pick4(wv[i], q), pick4(xw, q), 0)) - kMagicF;
                s += dot * (quad_scale(sv[i], jc, q) * dx[q]);
              }
#else
              for (uint k = 0; k < 4; ++k) {  // word k: quads 2k (low nibbles), 2k + 1 (high)
                const uint w = pick4(wv[i], k);
                const vec2 dw = unpackHalf2x16(pick4(sv[i], k));
                const uvec4 xk = k < 2 ? xw0 : xw1;
                const vec4 dk = k < 2 ? dx0 : dx1;
                const float lo = intBitsToFloat(base[2 * k] + sdot(w & 0x0f0f0f0fu, pick4(xk, (2 * k) % 4), 0)) - kMagicF;
                const float hi = intBitsToFloat(base[2 * k + 1] + sdot((w >> 4) & 0x0f0f0f0fu, pick4(xk, (2 * k + 1) % 4), 0)) - kMagicF;
                s += lo * (dw.x * dk[(2 * k) % 4]) + hi * (dw.y * dk[(2 * k + 1) % 4]);
              }
#endif
              acc[(m * kRows + r) * kTokens + t] += keep * s;
            }
          }
        }
      }
    }

    for (uint i = 0; i < kMats * kRows * kTokens; ++i) acc[i] = subgroupAdd(acc[i]);
    if (lane == 0) {
      for (uint r = 0; r < kRows; ++r) {
        for (uint t = 0; t < kTokens; ++t) {
          if (row0 + r >= pc.rows || t0 + t >= pc.n_tokens) continue;
#ifdef GATE_UP
          const float g = acc[r * kTokens + t], u = acc[(kRows + r) * kTokens + t];
          y[(t0 + t) * pc.y_stride + row0 + r] = gelu_tanh(g) * u;
#else
          y[(t0 + t) * pc.y_stride + row0 + r] = acc[r * kTokens + t];
#endif
        }
      }
#ifdef X8_OUT
      if (row0 < pc.rows) arrive_x8(row0);  // T = 1, whole blocks: every row exists
#endif
    }
  }
}
