// Where the attention shaders find key s (a cache position) and at which position they rotate
// it (attention.h's kv modes, DESIGN.md §4, docs/KV_RING.md). Needs `step` (step.h) declared;
// kv_key also `k_cache` and `inv_freq`, and common/rope.glsl included first.
//   exact:   positions are logical; position s lives in slot s % slots, K already rotated.
//   tiered:  the chunk attends plan.key_slots[s] at s < n_keys (a step word list); its own token
//            t = s - n_keys sits in the staging slot slots + t until kv_commit moves it.
//   sliding: the last n_s positions at 0 .. n_s-1, the chunk after: logical pos0 - n_s + s,
//            still at slot logical % slots.
// Ring modes store K before RoPE: keys are rotated at their cache position as they are loaded.
// The mode is a specialization constant (one pipeline per mode, gpu/ops/attention.cpp): the
// driver folds the branches below, so the exact-mode kernels carry no ring addressing or
// rotation in their inner loops (a runtime mode cost E2B's decode passes ~40%).

layout(constant_id = INFER_ATTN_SPEC_KV_MODE) const uint kKvMode = INFER_KV_EXACT;

uint kv_cache_pos0() {
  return kKvMode == INFER_KV_TIERED  ? step[INFER_STEP_N_KEYS]
         : kKvMode == INFER_KV_SLIDING ? step[INFER_STEP_N_SLIDE]
                                       : step[INFER_STEP_POS0];
}

uint kv_slot(uint s, uint slots) {
  if (kKvMode == INFER_KV_TIERED) {
    const uint n = step[INFER_STEP_N_KEYS];
    return s < n ? step[INFER_STEP_KEYS(step[INFER_STEP_T]) + s] : slots + (s - n);
  }
  if (kKvMode == INFER_KV_SLIDING) {
    return (s + step[INFER_STEP_POS0] - step[INFER_STEP_N_SLIDE]) % slots;
  }
  return s % slots;
}

#ifdef INFER_KV_ROTATE_KEYS
// Element e of the key row at k_cache[row ..]: as stored in the exact mode; in the ring modes
// rotated (rotate-half RoPE) at cache position `pos`, as qkv_prep rotates q: angle
// pos · inv_freq[j] rounded in f32.
float kv_key(uint row, uint e, uint d, uint pos) {
  const float x = k_cache[row + e];
  if (kKvMode == INFER_KV_EXACT) return x;
  const uint half_d = d / 2;
  const bool lo = e < half_d;
  const uint j = lo ? e : e - half_d;
  const float y = k_cache[row + (lo ? e + half_d : j)];
  float s, c;
  precise float angle = float(pos) * inv_freq[j];
  rope_sincos(angle, s, c);
  return lo ? x * c - y * s : x * c + y * s;
}

// Elements e and e + d/2 (e < d/2) of the key row, as kv_key gives them, with one sincos for
// the pair (attend_tiled.comp stages dims in such pairs).
vec2 kv_key_pair(uint row, uint e, uint d, uint pos) {
  const float x = k_cache[row + e], y = k_cache[row + e + d / 2];
  if (kKvMode == INFER_KV_EXACT) return vec2(x, y);
  float s, c;
  precise float angle = float(pos) * inv_freq[e];
  rope_sincos(angle, s, c);
  return vec2(x * c - y * s, y * c + x * s);
}
#endif
