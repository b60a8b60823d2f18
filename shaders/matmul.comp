// Tiled matrix-matrix product for prefill, f32 activations and accumulation:
//   W: binding 0, [rows, cols] in the device layout of W_* (common/weights.glsl)
//   x: binding 1, [n_tokens, x_stride] f32        y: binding 2, [n_tokens, y_stride] f32
//   GATE_UP only: binding 3, the up matrix, like W (which is then the gate); y = gelu(g) · u
//   push: MatvecPush (matvec.h). spec: TILE_ROWS x TILE_TOKENS outputs per workgroup,
//   THREAD_ROWS x THREAD_TOKENS per invocation (multiples of 4), LOCAL_SIZE = the product of the
//   two ratios, STAGES shared-memory buffers (1 or 2).
// Workgroup (x + z * num_x) owns rows [TILE_ROWS * g, ...), workgroup y tokens
// [TILE_TOKENS * y, ...). Each 32-column step stages W (decoded to f32, once per workgroup) and x
// in shared memory; every weight then serves TILE_TOKENS tokens and every activation TILE_ROWS
// rows. A register-blocked SIMT GEMM: each invocation keeps THREAD_ROWS x THREAD_TOKENS sums and
// per column reads its rows and tokens as vec4s (4 shared loads per 64 FMAs at 8 x 8). The
// global loads of step s + 1 go out (raw, into registers) before the FMAs of step s, and are
// decoded and stored after them, so their latency hides behind the arithmetic.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

#include "matvec.h"

layout(local_size_x_id = INFER_MATMUL_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_MATMUL_SPEC_TILE_ROWS) const uint kTileRows = 128;
layout(constant_id = INFER_MATMUL_SPEC_TILE_TOKENS) const uint kTileTokens = 128;
layout(constant_id = INFER_MATMUL_SPEC_THREAD_ROWS) const uint kThreadRows = 8;
layout(constant_id = INFER_MATMUL_SPEC_THREAD_TOKENS) const uint kThreadTokens = 8;
layout(constant_id = INFER_MATMUL_SPEC_STAGES) const uint kStages = 1;
const uint kTileCols = INFER_MATMUL_TILE_COLS;
const uint kQuads = kTileCols / 4;  // quads of a row in a step (common/matmul_tiles.glsl)

layout(binding = 1, std430) readonly buffer X { float x[]; };
layout(binding = 2, std430) writeonly buffer Y { float y[]; };

#ifdef GATE_UP
#define W_PAIR
#define W_PAIR_BINDING INFER_MATVEC_BINDING_UP
const uint kMats = 2;
#include "common/gelu.glsl"
#else
const uint kMats = 1;
#endif
#include "common/weights.glsl"
#include "common/matmul_tiles.glsl"

const uint kRowThreads = kTileRows / kThreadRows;
const uint kTokenThreads = kTileTokens / kThreadTokens;
const uint kThreads = kRowThreads * kTokenThreads;
const uint kRowVecs = kTileRows / 4;  // a tile column in vec4s of 4 rows (or tokens)
const uint kTokenVecs = kTileTokens / 4;
const uint kRowChunks = kThreadRows / 4;  // an invocation's vec4s of rows, of tokens
const uint kTokenChunks = kThreadTokens / 4;
// Staging work per invocation and step: quads of W (per matrix), single floats of x.
const uint kWTotal = kTileRows * kQuads;
const uint kXTotal = kTileTokens * kTileCols;
const uint kWItems = (kWTotal + kThreads - 1) / kThreads;
const uint kXItems = (kXTotal + kThreads - 1) / kThreads;

// Tiles column-major in vec4s: element (k, v) holds rows (tokens) 4v..4v+3 of column k. The vec4
// index is XOR-swizzled per column (v ^ swizzle(k), a permutation of a column's vec4s): the
// compute loop reads whole vec4s conflict-free either way, and the staging stores (32 lanes: 8
// quads or columns x 4 rows or tokens, each writing one component) land in 32 different banks.
const uint kWStage = kMats * kTileCols * kRowVecs;
const uint kXStage = kTileCols * kTokenVecs;
shared vec4 w_tile[kStages * kWStage];
shared vec4 x_tile[kStages * kXStage];

// The largest power of two <= 8 dividing n: the XOR keeps v below n.
uint swizzle_mask(uint n) {
  return n % 8u == 0u ? 7u : n % 4u == 0u ? 3u : n % 2u == 0u ? 1u : 0u;
}

uvec4 w_raw[kMats * kWItems];
float x_raw[kXItems];

// Issues the global loads of the step at c0 (raw, not waited on).
void load_step(uint m, uint row0, uint c0) {
  [[unroll]] for (uint it = 0; it < kWItems; ++it) {
    const uint i = gl_LocalInvocationID.x + it * kThreads;
    if (kWTotal % kThreads != 0 && i >= kWTotal) break;
    // Rows past the end repeat the last row: their outputs are never stored.
    const uint row = min(row0 + i / kQuads, pc.rows - 1);
    w_raw[m * kWItems + it] = tile_quad_raw(m, row * w_stride(), c0, i % kQuads);
  }
}

void load_x(uint t0, uint c0) {
  [[unroll]] for (uint it = 0; it < kXItems; ++it) {
    const uint i = gl_LocalInvocationID.x + it * kThreads;
    if (kXTotal % kThreads != 0 && i >= kXTotal) break;
    // 8 neighbouring columns of 4 tokens a 32-lane group: whole 32-byte sectors.
    const uint c = (i / (8u * kTileTokens)) * 8u + i % 8u, t = (i / 8u) % kTileTokens;
    const uint col = c0 + c, tok = t0 + t;
    // Zeros past the end meet the zero weights of the layout's padding (or any weight past rows).
    x_raw[it] = col < pc.cols && tok < pc.n_tokens ? x[tok * pc.x_stride + col] : 0.0;
  }
}

// Decodes the loaded quads of the step at c0 into stage `stage` of w_tile.
void store_step(uint m, uint stage, uint c0) {
  const uint mask = swizzle_mask(kRowVecs);
  [[unroll]] for (uint it = 0; it < kWItems; ++it) {
    const uint i = gl_LocalInvocationID.x + it * kThreads;
    if (kWTotal % kThreads != 0 && i >= kWTotal) break;
    const uint r = i / kQuads, u = i % kQuads;
    const vec4 w = tile_quad_decode(w_raw[m * kWItems + it], c0);
    const uint v = stage * kWStage + (m * kTileCols + 4u * u) * kRowVecs + ((r / 4u) ^ (u & mask));
    [[unroll]] for (uint e = 0; e < 4; ++e) w_tile[v + e * kRowVecs][r % 4u] = w[e];
  }
}

void store_x(uint stage) {
  const uint mask = swizzle_mask(kTokenVecs);
  [[unroll]] for (uint it = 0; it < kXItems; ++it) {
    const uint i = gl_LocalInvocationID.x + it * kThreads;
    if (kXTotal % kThreads != 0 && i >= kXTotal) break;
    const uint c = (i / (8u * kTileTokens)) * 8u + i % 8u, t = (i / 8u) % kTileTokens;
    x_tile[stage * kXStage + c * kTokenVecs + ((t / 4u) ^ (c & mask))][t % 4u] = x_raw[it];
  }
}

void main() {
  const uint row0 = (gl_WorkGroupID.z * gl_NumWorkGroups.x + gl_WorkGroupID.x) * kTileRows;
  const uint t0 = gl_WorkGroupID.y * kTileTokens;
  if (row0 >= pc.rows) return;  // whole workgroup: the grid is rounded up in z
  const uint tid = gl_LocalInvocationID.x;
  // Invocation (tr, tt) owns the row vec4s tr + i * kRowThreads and the token vec4s
  // tt + j * kTokenThreads: neighbours read neighbouring vec4s.
  const uint tr = tid % kRowThreads, tt = tid / kRowThreads;
  const uint w_mask = swizzle_mask(kRowVecs), x_mask = swizzle_mask(kTokenVecs);

  // acc[(m * kRowChunks + i) * kThreadTokens + token]: 4 rows of matrix m.
  vec4 acc[kMats * kRowChunks * kThreadTokens];
  [[unroll]] for (uint i = 0; i < kMats * kRowChunks * kThreadTokens; ++i) acc[i] = vec4(0.0);

  const uint steps = (pc.cols + kTileCols - 1) / kTileCols;
  // Each matrix in its own call with a literal m, so the matrix choice folds away (a runtime m
  // cost NVIDIA's compiler a 10x slower gate-up).
  load_step(0u, row0, 0u);
#ifdef GATE_UP
  load_step(1u, row0, 0u);
#endif
  load_x(t0, 0u);
  store_step(0u, 0u, 0u);
#ifdef GATE_UP
  store_step(1u, 0u, 0u);
#endif
  store_x(0u);
  barrier();

  for (uint s = 0; s < steps; ++s) {
    const uint stage = s % kStages, next_stage = (s + 1) % kStages;
    const uint next_c0 = (s + 1) * kTileCols;
    const bool more = s + 1 < steps;
    if (more) {
      load_step(0u, row0, next_c0);
#ifdef GATE_UP
      load_step(1u, row0, next_c0);
#endif
      load_x(t0, next_c0);
    }

    const uint ws = stage * kWStage, xs = stage * kXStage;
    [[unroll]] for (uint k = 0; k < kTileCols; ++k) {
      const uint wsw = (k / 4u) & w_mask, xsw = k & x_mask;
      vec4 a[kMats * kRowChunks];
      vec4 b[kTokenChunks];
      [[unroll]] for (uint m = 0; m < kMats; ++m) {
        [[unroll]] for (uint i = 0; i < kRowChunks; ++i) {
          a[m * kRowChunks + i] =
              w_tile[ws + (m * kTileCols + k) * kRowVecs + ((i * kRowThreads + tr) ^ wsw)];
        }
      }
      [[unroll]] for (uint j = 0; j < kTokenChunks; ++j) {
        b[j] = x_tile[xs + k * kTokenVecs + ((j * kTokenThreads + tt) ^ xsw)];
      }
      [[unroll]] for (uint i = 0; i < kMats * kRowChunks; ++i) {
        [[unroll]] for (uint j = 0; j < kTokenChunks; ++j) {
          [[unroll]] for (uint e = 0; e < 4; ++e) {
            acc[i * kThreadTokens + 4 * j + e] += a[i] * b[j][e];
          }
        }
      }
    }

    // One buffer: wait until every invocation has read it before overwriting it. Two: the next
    // step's buffer was last read before the previous barrier.
    if (kStages == 1) barrier();
    if (more) {
      store_step(0u, next_stage, next_c0);
#ifdef GATE_UP
      store_step(1u, next_stage, next_c0);
#endif
      store_x(next_stage);
    }
    barrier();
  }

  [[unroll]] for (uint i = 0; i < kRowChunks; ++i) {
    [[unroll]] for (uint j = 0; j < kTokenChunks; ++j) {
      [[unroll]] for (uint e = 0; e < 4; ++e) {
        const uint tok = t0 + 4u * (j * kTokenThreads + tt) + e;
        if (tok >= pc.n_tokens) continue;
        const vec4 g = acc[i * kThreadTokens + 4 * j + e];
#ifdef GATE_UP
        const vec4 up = acc[(kRowChunks + i) * kThreadTokens + 4 * j + e];
#endif
        [[unroll]] for (uint q = 0; q < 4; ++q) {
          const uint row = row0 + 4u * (i * kRowThreads + tr) + q;
          if (row >= pc.rows) continue;
#ifdef GATE_UP
          y[tok * pc.y_stride + row] = gelu_tanh(g[q]) * up[q];
#else
          y[tok * pc.y_stride + row] = g[q];
#endif
        }
      }
    }
  }
}
