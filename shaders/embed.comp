// Token embedding (GEMMA4_TEXT.md §4.2): x[t, :] = table[ids[t], :] · scale for t < T.
//   table: binding 0, [V, H] in the format chosen by W_* (common/weights.glsl)
//   step: binding 1, uint words (shaders/step.h), ids at INFER_STEP_IDS + t
//   x: binding 2, [T, H] f32
//   push: EmbedPush (embed.h). spec: LOCAL_SIZE. Workgroup (x, y = t) writes the columns of
//   weight units [LOCAL_SIZE · x, LOCAL_SIZE · (x + 1)) of token t.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : require

#include "embed.h"
#include "step.h"

layout(local_size_x_id = INFER_EMBED_SPEC_LOCAL_SIZE) in;

layout(binding = 1, std430) readonly buffer Step { uint step[]; };
layout(binding = 2, std430) writeonly buffer Xout { float x[]; };

#include "common/weights.glsl"

void main() {
  const uint t = gl_WorkGroupID.y;
  const uint u = gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  if (t >= pc.n_tokens || u >= units_per_row()) return;
  // The host checks ids; the clamp only keeps a bad one from reading past the table.
  const uint id = min(step[INFER_STEP_IDS + t], pc.rows - 1);
  float w[UNIT];
  decode_unit(id, u, w);
  for (uint k = 0; k < UNIT; ++k) {
    // Only bf16's last unit of an odd row runs past the row; every other unit is whole.
    if (UNIT * u + k < pc.cols) x[t * pc.cols + unit_col(u, k)] = w[k] * pc.scale;
  }
}
