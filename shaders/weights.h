// Specialization constants of common/weights.glsl, shared with the host (C/GLSL common subset).
// Ids well above any includer's own (matvec.h, matmul, embed.h, moe.h use 0-10).
#ifndef INFER_SHADERS_WEIGHTS_H_
#define INFER_SHADERS_WEIGHTS_H_

// uint: how Q8_0/Q4_0 quants become floats (weights.glsl's quad_weights): 1 (default) masked in
// place under a magic exponent, 0 extracted first (the earlier decode; INFER_QDECODE=0 for A/B).
#define INFER_WEIGHTS_SPEC_DECODE 30

#endif  // INFER_SHADERS_WEIGHTS_H_
