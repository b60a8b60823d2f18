// Tiled matrix-matrix product for prefill, f32 activations and accumulation:
//   W: binding 0, [rows, cols] in the device layout of W_* (common/weights.glsl)
//   x: binding 1, [n_tokens, x_stride] f32        y: binding 2, [n_tokens, y_stride] f32
//   GATE_UP only: binding 3, the up matrix, like W (which is then the gate); y = gelu(g) · u
//   push: MatvecPush (matvec.h). spec: TILE_ROWS x TILE_TOKENS outputs per workgroup,
//   THREAD_ROWS x THREAD_TOKENS per invocation, LOCAL_SIZE = the product of the two ratios.
// Workgroup (x + z * num_x) owns rows [TILE_ROWS * g, ...), workgroup y tokens
// [TILE_TOKENS * y, ...). Each step stages TILE_COLS columns of dequantized W and of x in shared
// memory, so every weight is decoded once per workgroup and reused by TILE_TOKENS tokens, and
// every activation is reused by TILE_ROWS rows.
#version 450
#extension GL_GOOGLE_include_directive : require

#include "matvec.h"

layout(local_size_x_id = INFER_MATMUL_SPEC_LOCAL_SIZE) in;
layout(constant_id = INFER_MATMUL_SPEC_TILE_ROWS) const uint kTileRows = 64;
layout(constant_id = INFER_MATMUL_SPEC_TILE_TOKENS) const uint kTileTokens = 64;
layout(constant_id = INFER_MATMUL_SPEC_THREAD_ROWS) const uint kThreadRows = 4;
layout(constant_id = INFER_MATMUL_SPEC_THREAD_TOKENS) const uint kThreadTokens = 4;
const uint kTileCols = INFER_MATMUL_TILE_COLS;

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

// Tiles stored column-major (column c of the step, then row / token) and padded by one, so the
// inner loop reads consecutive words across invocations and the stores spread over banks.
const uint kWStride = kTileRows + 1;
const uint kXStride = kTileTokens + 1;
shared float w_tile[kMats * kTileCols * kWStride];
shared float x_tile[kTileCols * kXStride];

// Decodes the quad of columns c..c+3 of tile row r of matrix m into w_tile. m is a literal at each
// call, so the matrix choice folds away (a runtime m costs NVIDIA's compiler a 10x slower
// gate-up). Rows past the end repeat the last row and quads past cols decode as 0: their outputs
// are never stored, and 0 weights meet the 0 activations staged past the end.
void stage_quad(uint m, uint r, uint c, uint row0, uint c0) {
  const uint row = min(row0 + r, pc.rows - 1);
  const vec4 w = c < pc.cols ? decode_quad_of(m, row, c) : vec4(0.0);
  for (uint k = 0; k < 4; ++k) w_tile[(m * kTileCols + c - c0 + k) * kWStride + r] = w[k];
}

void main() {
  const uint row0 = (gl_WorkGroupID.z * gl_NumWorkGroups.x + gl_WorkGroupID.x) * kTileRows;
  const uint t0 = gl_WorkGroupID.y * kTileTokens;
  if (row0 >= pc.rows) return;  // whole workgroup: the grid is rounded up in z
  const uint tid = gl_LocalInvocationID.x;
  // Invocation (tr, tt) owns rows tr + i * kRowThreads and tokens tt + j * kTokenThreads of the
  // tile: neighbours read neighbouring shared words.
  const uint kRowThreads = kTileRows / kThreadRows;
  const uint kTokenThreads = kTileTokens / kThreadTokens;
  const uint tr = tid % kRowThreads, tt = tid / kRowThreads;

  float acc[kMats * kThreadRows * kThreadTokens];
  for (uint i = 0; i < kMats * kThreadRows * kThreadTokens; ++i) acc[i] = 0.0;

  const uint kQuads = kTileCols / 4;  // quads of one row in a step
  for (uint c0 = 0; c0 < pc.cols; c0 += kTileCols) {
    // W: consecutive invocations take consecutive quads of a row (neighbouring 16-byte vectors of
    // the layout). Each matrix in its own loop: one decode live at a time.
    for (uint i = tid; i < kTileRows * kQuads; i += gl_WorkGroupSize.x) {
      stage_quad(0u, i / kQuads, c0 + 4 * (i % kQuads), row0, c0);
    }
#ifdef GATE_UP
    for (uint i = tid; i < kTileRows * kQuads; i += gl_WorkGroupSize.x) {
      stage_quad(1u, i / kQuads, c0 + 4 * (i % kQuads), row0, c0);
    }
#endif
    // x: consecutive invocations take consecutive columns of a token.
    for (uint i = tid; i < kTileTokens * kTileCols; i += gl_WorkGroupSize.x) {
      const uint c = i % kTileCols, t = i / kTileCols;
      const uint col = c0 + c, tok = t0 + t;
      x_tile[c * kXStride + t] =
          col < pc.cols && tok < pc.n_tokens ? x[tok * pc.x_stride + col] : 0.0;
    }
    barrier();

    for (uint c = 0; c < kTileCols; ++c) {
      float a[kMats * kThreadRows];
      float b[kThreadTokens];
      for (uint m = 0; m < kMats; ++m) {
        for (uint i = 0; i < kThreadRows; ++i) {
          a[m * kThreadRows + i] = w_tile[(m * kTileCols + c) * kWStride + tr + i * kRowThreads];
        }
      }
      for (uint j = 0; j < kThreadTokens; ++j) b[j] = x_tile[c * kXStride + tt + j * kTokenThreads];
      for (uint i = 0; i < kMats * kThreadRows; ++i) {
        for (uint j = 0; j < kThreadTokens; ++j) acc[i * kThreadTokens + j] += a[i] * b[j];
      }
    }
    barrier();  // the next step overwrites the tiles
  }

  for (uint i = 0; i < kThreadRows; ++i) {
    const uint row = row0 + tr + i * kRowThreads;
    if (row >= pc.rows) continue;
    for (uint j = 0; j < kThreadTokens; ++j) {
      const uint tok = t0 + tt + j * kTokenThreads;
      if (tok >= pc.n_tokens) continue;
#ifdef GATE_UP
      const float g = acc[i * kThreadTokens + j];
      const float u = acc[(kThreadRows + i) * kThreadTokens + j];
      y[tok * pc.y_stride + row] = gelu_tanh(g) * u;
#else
      y[tok * pc.y_stride + row] = acc[i * kThreadTokens + j];
#endif
    }
  }
}
