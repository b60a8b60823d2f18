// TEMPORARY A/B (session 12, INFER_COOP_AB=ab6/ab7): matmul_coop.comp with two shared-memory
// stages of one GGML block (32 columns) each, so that one barrier a step separates them and the
// staging of step n + 1 (decode, shared stores) is issued while step n's products run on the
// tensor cores; each block's scale loaded once (by one invocation), not with every quad. The
// bindings, push, specialization constants, precision and layouts are matmul_coop.comp's (its
// header says what they hold); ab7 (W_PREDEC) stages W as coop_w_predecode.comp wrote it.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

#include "matvec.h"

layout(constant_id = INFER_MATMUL_COOP_SPEC_LO) const uint kLo = 1;
layout(constant_id = INFER_MATMUL_COOP_SPEC_ROWS) const uint kRows = 64;
layout(constant_id = INFER_MATMUL_COOP_SPEC_TOKENS) const uint kTokens = 64;

#ifdef X_Q8
layout(binding = 1, std430) readonly buffer XQ { uint xq_words[]; };
layout(binding = 1, std430) readonly buffer XD { float xq_scales[]; };
#else
layout(binding = 1, std430) readonly buffer XP { uvec4 x_pairs[]; };
#endif
layout(binding = 2, std430) writeonly buffer Y { float y[]; };

#ifdef GATE_UP
#define W_PAIR
#define W_PAIR_BINDING INFER_MATVEC_BINDING_UP
const uint kMats = 2;
#include "common/gelu.glsl"
#else
const uint kMats = 1;
#endif
#define WEIGHTS_F16_QUADS
#include "common/weights.glsl"
#ifdef W_F32
#error "f32 weights take matmul.comp"
#endif
#if defined(X_Q8) && !defined(W_SCALED)
#error "X_Q8 takes Q8_0 or Q4_0 weights"
#endif
#ifdef W_PREDEC
layout(binding = 0, std430) readonly buffer PQ0 { uvec2 pq0[]; };
layout(binding = 0, std430) readonly buffer PD0 { float pd0[]; };
#ifdef GATE_UP
layout(binding = 3, std430) readonly buffer PQ1 { uvec2 pq1[]; };
layout(binding = 3, std430) readonly buffer PD1 { float pd1[]; };
#endif
#endif

#ifdef GATE_UP
const uint kSubgroupRows = 16;
#else
const uint kSubgroupRows = 32;
#endif
const uint kSubgroups = kTokens / 32 * (kRows / kSubgroupRows);
const uint kTokenSubgroups = kTokens / 32;
const uint kCols = 32;  // one block a step
const uint kQuads = kCols / 4;
const uint kStride = kCols + INFER_MATMUL_COOP_PAD;  // halves a shared row

// One stage (halves): x hi [token][col], x lo (not with X_Q8), W [matrix][row][col]; floats:
// the block scales [matrix][row], X_Q8 the tokens' [token].
const uint kXHalves = kTokens * kStride;
const uint kXOff = 0;
#ifdef X_Q8
const uint kLoUsed = 0;
const uint kXLoOff = kXOff;
const uint kWOff = kXOff + kXHalves;
const uint kXdFloats = kTokens;
#else
const uint kLoUsed = kLo;
const uint kXLoOff = kXOff + kXHalves;
const uint kWOff = kXLoOff + kXHalves;
const uint kXdFloats = 0;
#endif
const uint kStageHalves = kWOff + kMats * kRows * kStride;
#ifdef W_SCALED
const uint kDFloats = kMats * kRows;
#else
const uint kDFloats = 0;
#endif
const uint kXdOff = kDFloats;
const uint kStageFloats = kDFloats + kXdFloats;
shared uvec2 sh_t[2 * kStageHalves / 4];
shared float sh_f[2 * kStageFloats + 1];
#define TILE_LOAD(f, o, cm) coopMatLoadNV(f, sh_t, (o) / 4, kStride / 4, cm)

layout(local_size_x_id = INFER_MATMUL_SPEC_LOCAL_SIZE) in;
const uint kWPer = kRows * kQuads / gl_WorkGroupSize.x;
const uint kXPer = kTokens * kQuads / gl_WorkGroupSize.x;
const uint kDPer = (kMats * kRows + gl_WorkGroupSize.x - 1) / gl_WorkGroupSize.x;

#define FRAG_A fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define FRAG_ACC fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>

uvec2 w_raw[kMats * kWPer];  // Q8_0/Q4_0: the quant word (.x); bf16 and W_PREDEC: the quad
#ifdef W_SCALED
float d_raw[kDPer];
#endif
#ifdef X_Q8
uint x_raw[kXPer];
float xd_raw[kXPer];
#else
uvec4 x_raw[kXPer];
#endif

uvec2 w_quad_raw(uint m, uint row, uint c) {
#if defined(W_PREDEC)
  const uint q = row * (pc.cols / 4) + c / 4;
#ifdef GATE_UP
  return m == 0u ? pq0[q] : pq1[q];
#else
  return pq0[q];
#endif
#elif defined(W_SCALED) && defined(COOP_DB_QUADSCALE)
  return quad_raw_of(m, row, c).xy;  // quant word, scale word
#elif defined(W_SCALED)
  return uvec2(quad_word_of(m, row, c), 0u);
#else
  return quad_raw_of(m, row, c).xy;
#endif
}

#ifdef W_SCALED
float w_block_scale(uint m, uint row, uint c) {
#if defined(W_PREDEC)
  const uint i = pc.rows * (pc.cols / 2) + row * (pc.cols / 32) + c / 32;
#ifdef GATE_UP
  return m == 0u ? pd0[i] : pd1[i];
#else
  return pd0[i];
#endif
#else
  return block_scale_of(m, row, c);
#endif
}
#endif

// Issues the loads of step c0 (cols is a multiple of 64: coop_path): rows past the end repeat
// the last row, tokens past the end are 0.
void load_step(uint row0, uint t0, uint c0) {
  for (uint k = 0; k < kWPer; ++k) {
    const uint i = gl_LocalInvocationID.x + k * gl_WorkGroupSize.x;
    const uint row = min(row0 + i / kQuads, pc.rows - 1), c = c0 + 4 * (i % kQuads);
    for (uint m = 0; m < kMats; ++m) w_raw[m * kWPer + k] = w_quad_raw(m, row, c);
  }
#if defined(W_SCALED) && !defined(COOP_DB_QUADSCALE)
  for (uint j = 0; j < kDPer; ++j) {
    const uint i = gl_LocalInvocationID.x + j * gl_WorkGroupSize.x;
    if (kDPer * gl_WorkGroupSize.x == kMats * kRows || i < kMats * kRows) {
      d_raw[j] = w_block_scale(i / kRows, min(row0 + i % kRows, pc.rows - 1), c0);
    }
  }
#endif
  for (uint k = 0; k < kXPer; ++k) {
    const uint i = gl_LocalInvocationID.x + k * gl_WorkGroupSize.x;
    const uint t = i / kQuads, col = c0 + 4 * (i % kQuads), tok = t0 + t;
    const bool live = tok < pc.n_tokens;
    const uint q = tok * (pc.cols / 4) + col / 4;
#ifdef X_Q8
    x_raw[k] = live ? xq_words[q] : 0u;
    xd_raw[k] = live && col % 32 == 0 ? xq_scales[pc.n_tokens * (pc.cols / 4) + q / 8] : 0.0;
#else
    x_raw[k] = live ? x_pairs[q] : uvec4(0);
#endif
  }
}

const float kLoScale = INFER_MATMUL_COOP_LO_SCALE;

#define tile_store(o, q) sh_t[(o) / 4] = uvec2(packFloat2x16((q).xy), packFloat2x16((q).zw))

// Decodes the registers (step c0) into stage `stage`.
void store_step(uint c0, uint stage) {
  const uint tb = stage * kStageHalves, fb = stage * kStageFloats;
  for (uint k = 0; k < kWPer; ++k) {
    const uint i = gl_LocalInvocationID.x + k * gl_WorkGroupSize.x;
    const uint r = i / kQuads, c = c0 + 4 * (i % kQuads);
    for (uint m = 0; m < kMats; ++m) {
      const uvec2 raw = w_raw[m * kWPer + k];
      const uint o = tb + kWOff + (m * kRows + r) * kStride + 4 * (i % kQuads);
#ifdef W_PREDEC
      sh_t[o / 4] = raw;
#else
      tile_store(o, quad_q16_from_raw(uvec4(raw, 0u, 0u), c));
#endif
#ifdef COOP_DB_QUADSCALE
      if (i % kQuads == 0) sh_f[fb + m * kRows + r] = quad_d_from_raw(uvec4(raw, 0u, 0u), c);
#endif
    }
  }
#if defined(W_SCALED) && !defined(COOP_DB_QUADSCALE)
  for (uint j = 0; j < kDPer; ++j) {
    const uint i = gl_LocalInvocationID.x + j * gl_WorkGroupSize.x;
    if (kDPer * gl_WorkGroupSize.x == kMats * kRows || i < kMats * kRows) {
      sh_f[fb + i] = d_raw[j];  // [matrix][row]
    }
  }
#endif
  for (uint k = 0; k < kXPer; ++k) {
    const uint i = gl_LocalInvocationID.x + k * gl_WorkGroupSize.x;
    const uint o = tb + (i / kQuads) * kStride + 4 * (i % kQuads);
#ifdef X_Q8
    const uint w = x_raw[k] ^ 0x80808080u;
    const uint lo = (w & 0xffu) | ((w & 0xff00u) << 8);
    const uint hi = ((w >> 16) & 0xffu) | (w & 0xff000000u) >> 8;
    const f16vec2 bias = f16vec2(float16_t(1152.0));
    tile_store(kXOff + o, f16vec4(unpackFloat2x16(lo | 0x64006400u) - bias,
                                unpackFloat2x16(hi | 0x64006400u) - bias));
    if (i % kQuads == 0) sh_f[fb + kXdOff + i / kQuads] = xd_raw[k];
#else
    tile_store(kXOff + o, f16vec4(unpackFloat2x16(x_raw[k].x), unpackFloat2x16(x_raw[k].y)));
    tile_store(kXLoOff + o, f16vec4(unpackFloat2x16(x_raw[k].z), unpackFloat2x16(x_raw[k].w)));
#endif
  }
}

// Writes fragment f straight to y when whole and 16-byte aligned, else through 1 KB of sh_t a
// subgroup (the stages are free: the main loop ended on a barrier) with bounds.
void store_frag(FRAG_ACC f, uint tok0, uint row0) {
  if (tok0 + 16 <= pc.n_tokens && row0 + 16 <= pc.rows && (pc.y_stride & 3u) == 0u) {
    coopMatStoreNV(f, y, tok0 * pc.y_stride + row0, pc.y_stride, false);
    return;
  }
  const uint base = gl_SubgroupID * 128;  // uvec2s: 256 floats
  coopMatStoreNV(f, sh_t, base, 8, false);
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  for (uint i = gl_SubgroupInvocationID; i < 256; i += gl_SubgroupSize) {
    const uint t = i / 16, r = i % 16;
    if (tok0 + t < pc.n_tokens && row0 + r < pc.rows) {
      const uvec2 v = sh_t[base + i / 2];
      y[(tok0 + t) * pc.y_stride + row0 + r] = uintBitsToFloat((i % 2) == 0 ? v.x : v.y);
    }
  }
  subgroupBarrier();
}

// The step's products (stage base tb) of x's hi parts into c.., lo parts into c.. (LO 1) or
// d.. (LO 2), with W rows w0.. and w1..
#define MULTIPLY(c00, c01, c10, c11, d00, d01, d10, d11)                                  \
  for (uint k = 0; k < kCols; k += 16) {                                                  \
    FRAG_A a0, a1, b0, b1;                                                                \
    TILE_LOAD(a0, tb + kXOff + st * kStride + k, false);                                  \
    TILE_LOAD(a1, tb + kXOff + (st + 16) * kStride + k, false);                           \
    TILE_LOAD(b0, tb + kWOff + w0 * kStride + k, true);                                   \
    TILE_LOAD(b1, tb + kWOff + w1 * kStride + k, true);                                   \
    c00 = coopMatMulAddNV(a0, b0, c00);                                                   \
    c01 = coopMatMulAddNV(a0, b1, c01);                                                   \
    c10 = coopMatMulAddNV(a1, b0, c10);                                                   \
    c11 = coopMatMulAddNV(a1, b1, c11);                                                   \
    if (kLoUsed != 0u) {                                                                  \
      FRAG_A l0, l1;                                                                      \
      TILE_LOAD(l0, tb + kXLoOff + st * kStride + k, false);                              \
      TILE_LOAD(l1, tb + kXLoOff + (st + 16) * kStride + k, false);                       \
      if (kLoUsed == 1u) {                                                                \
        c00 = coopMatMulAddNV(l0, b0, c00);                                               \
        c01 = coopMatMulAddNV(l0, b1, c01);                                               \
        c10 = coopMatMulAddNV(l1, b0, c10);                                               \
        c11 = coopMatMulAddNV(l1, b1, c11);                                               \
      } else {                                                                            \
        d00 = coopMatMulAddNV(l0, b0, d00);                                               \
        d01 = coopMatMulAddNV(l0, b1, d01);                                               \
        d10 = coopMatMulAddNV(l1, b0, d10);                                               \
        d11 = coopMatMulAddNV(l1, b1, d11);                                               \
      }                                                                                   \
    }                                                                                     \
  }

// Step c0 on stage `stage` (a literal at each call, so that every shared-memory offset below is
// a constant after inlining: with the stage a loop variable the block scales' stride-0 loads
// read wrong values on the H200, call 2).
void db_step(uint row0, uint t0, uint c0, const uint stage, uint st, uint w0, uint w1,
             inout FRAG_ACC g00, inout FRAG_ACC g01, inout FRAG_ACC g10, inout FRAG_ACC g11,
             inout FRAG_ACC h00, inout FRAG_ACC h01, inout FRAG_ACC h10, inout FRAG_ACC h11) {
  const uint tb = stage * kStageHalves, fb = stage * kStageFloats;
  const float unscale = 1.0 / kLoScale;
#ifdef W_SCALED
  FRAG_ACC c00 = FRAG_ACC(0.0), c01 = FRAG_ACC(0.0), c10 = FRAG_ACC(0.0), c11 = FRAG_ACC(0.0);
  FRAG_ACC d00 = FRAG_ACC(0.0), d01 = FRAG_ACC(0.0), d10 = FRAG_ACC(0.0), d11 = FRAG_ACC(0.0);
  MULTIPLY(c00, c01, c10, c11, d00, d01, d10, d11)
#else
  MULTIPLY(g00, g01, g10, g11, h00, h01, h10, h11)
#endif
  // The next step into the other stage while these products run.
#ifndef COOP_DB_EPI_FIRST
  if (c0 + kCols < pc.cols) {
    store_step(c0 + kCols, stage ^ 1u);
    if (c0 + 2 * kCols < pc.cols) load_step(row0, t0, c0 + 2 * kCols);
  }
#endif
#ifdef W_SCALED
  FRAG_ACC s0, s1;
  coopMatLoadNV(s0, sh_f, fb + (w0 / kRows) * kRows + w0 % kRows, 0, false);
  coopMatLoadNV(s1, sh_f, fb + (w1 / kRows) * kRows + w1 % kRows, 0, false);
#ifdef X_Q8
  FRAG_ACC x0, x1;
  coopMatLoadNV(x0, sh_f, fb + kXdOff + st, 0, true);
  coopMatLoadNV(x1, sh_f, fb + kXdOff + st + 16, 0, true);
  for (int e = 0; e < g00.length(); ++e) {
    g00[e] += c00[e] * (s0[e] * x0[e]);
    g01[e] += c01[e] * (s1[e] * x0[e]);
    g10[e] += c10[e] * (s0[e] * x1[e]);
    g11[e] += c11[e] * (s1[e] * x1[e]);
  }
#else
  for (int e = 0; kLoUsed == 2u && e < g00.length(); ++e) {
    c00[e] += d00[e] * unscale;
    c01[e] += d01[e] * unscale;
    c10[e] += d10[e] * unscale;
    c11[e] += d11[e] * unscale;
  }
  for (int e = 0; e < g00.length(); ++e) {
    g00[e] += c00[e] * s0[e];
    g01[e] += c01[e] * s1[e];
    g10[e] += c10[e] * s0[e];
    g11[e] += c11[e] * s1[e];
  }
#endif
#endif
#ifdef COOP_DB_EPI_FIRST
  if (c0 + kCols < pc.cols) {
    store_step(c0 + kCols, stage ^ 1u);
    if (c0 + 2 * kCols < pc.cols) load_step(row0, t0, c0 + 2 * kCols);
  }
#endif
  barrier();  // stage ^ 1 complete; this stage free for the step after next
}

void main() {
  const uint row0 = (gl_WorkGroupID.z * gl_NumWorkGroups.x + gl_WorkGroupID.x) * kRows;
  const uint t0 = gl_WorkGroupID.y * kTokens;
  if (row0 >= pc.rows) return;
  const uint sg = gl_SubgroupID;
  const uint st = 32 * (sg % kTokenSubgroups), sr = kSubgroupRows * (sg / kTokenSubgroups);
  const float unscale = 1.0 / kLoScale;
#ifdef GATE_UP
  const uint w0 = sr, w1 = kRows + sr;
#else
  const uint w0 = sr, w1 = sr + 16;
#endif

  FRAG_ACC g00 = FRAG_ACC(0.0), g01 = FRAG_ACC(0.0), g10 = FRAG_ACC(0.0), g11 = FRAG_ACC(0.0);
  FRAG_ACC h00 = FRAG_ACC(0.0), h01 = FRAG_ACC(0.0), h10 = FRAG_ACC(0.0), h11 = FRAG_ACC(0.0);

  load_step(row0, t0, 0);
  store_step(0, 0);
  load_step(row0, t0, kCols);  // cols >= 64
  barrier();
  for (uint c0 = 0; c0 < pc.cols; c0 += 2 * kCols) {  // an even number of steps (coop_path)
    db_step(row0, t0, c0, 0u, st, w0, w1, g00, g01, g10, g11, h00, h01, h10, h11);
    db_step(row0, t0, c0 + kCols, 1u, st, w0, w1, g00, g01, g10, g11, h00, h01, h10, h11);
  }

#ifndef W_SCALED
  for (int e = 0; kLo == 2u && e < g00.length(); ++e) {
    g00[e] += h00[e] * unscale;
    g01[e] += h01[e] * unscale;
    g10[e] += h10[e] * unscale;
    g11[e] += h11[e] * unscale;
  }
#endif
#ifdef GATE_UP
  for (int e = 0; e < g00.length(); ++e) {
    g00[e] = gelu_tanh(g00[e]) * g01[e];
    g10[e] = gelu_tanh(g10[e]) * g11[e];
  }
  store_frag(g00, t0 + st, row0 + sr);
  store_frag(g10, t0 + st + 16, row0 + sr);
#else
  store_frag(g00, t0 + st, row0 + sr);
  store_frag(g01, t0 + st, row0 + sr + 16);
  store_frag(g10, t0 + st + 16, row0 + sr);
  store_frag(g11, t0 + st + 16, row0 + sr + 16);
#endif
}
