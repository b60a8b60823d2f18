// Token embedding (GEMMA4_TEXT.md §4.2): x[t, :] = table[ids[t], :] · scale for t < T.
//   table: binding 0, [V, H] in the device layout of W_* (common/weights.glsl)
//   step: binding 1, uint words (shaders/step.h), ids at INFER_STEP_IDS + t
//   x: binding 2, [T, H] f32
//   push: EmbedPush (embed.h). spec: LOCAL_SIZE. Workgroup (x, y = t) writes the columns of
//   weight units [LOCAL_SIZE · x, LOCAL_SIZE · (x + 1)) of token t.
#version 450
#extension GL_GOOGLE_include_directive : require

#include "embed.h"
#include "step.h"

layout(local_size_x_id = INFER_EMBED_SPEC_LOCAL_SIZE) in;

layout(binding = 1, std430) readonly buffer Step { uint step[]; };
layout(binding = 2, std430) writeonly buffer Xout { float x[]; };

#include "common/weights.glsl"

void main() {
  const uint t = gl_WorkGroupID.y;
  const uint u = gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  if (t >= pc.n_tokens || u >= (pc.cols + UNIT - 1) / UNIT) return;
  // The host checks ids; the clamp only keeps a bad one from reading past the table.
  const uint id = min(step[INFER_STEP_IDS + t], pc.rows - 1);
  for (uint k = 0; k < UNIT; ++k) {
    // Only bf16's last unit of an odd row runs past the row; every other unit is whole.
    const uint c = UNIT * u + k;
    if (c < pc.cols) x[t * pc.cols + c] = weight_at(id, c) * pc.scale;
  }
}
