// The step buffer: a small host-visible uint buffer the host writes before each submit, so a
// decode command buffer can be recorded once and replayed for every token. Shaders that depend
// on where the chunk is read it (binding named `Step`, `readonly buffer Step { uint step[]; }`).
#ifndef INFER_SHADERS_STEP_H_
#define INFER_SHADERS_STEP_H_

#define INFER_STEP_POS0 0  // position of the chunk's first token
#define INFER_STEP_T 1     // tokens in the chunk (1 for decode)
// KV ring only (DESIGN.md §4, docs/KV_RING.md; the exact path leaves them unread): the cache
// position of the chunk's first token on tiered (full) layers, n_keys = the keys it attends
// besides itself, and on sliding layers n_s = min(pos0, sliding_window - 1).
#define INFER_STEP_N_KEYS 2
#define INFER_STEP_N_SLIDE 3
#define INFER_STEP_IDS 4   // the chunk's T token ids start here
// KV ring only, after the ids: the T slots the chunk's rows go to (plan.write_slots), then the
// n_keys slots of the keys at cache positions 0 .. n_keys-1 (plan.key_slots). T is
// step[INFER_STEP_T], so the layout needs no other constant.
#define INFER_STEP_WRITES(T) (INFER_STEP_IDS + (T))
#define INFER_STEP_KEYS(T) (INFER_STEP_IDS + 2 * (T))
// KV ring only, after the key slots: the number E <= T of window tokens the chunk evicts whose
// rows go to the host (0 without an eviction sink), then their E slots; evicted token e's rows
// go to staging row e (kv_evict_copy.comp). n_keys is step[INFER_STEP_N_KEYS].
#define INFER_STEP_EVICT(T, n_keys) (INFER_STEP_KEYS(T) + (n_keys))
#define INFER_STEP_WORDS(max_chunk) (INFER_STEP_IDS + (max_chunk))
#define INFER_STEP_RING_WORDS(max_chunk, max_keys) \
  (INFER_STEP_IDS + 3 * (max_chunk) + (max_keys) + 1)

#endif  // INFER_SHADERS_STEP_H_
