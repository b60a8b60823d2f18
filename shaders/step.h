// The step buffer: a small host-visible uint buffer the host writes before each submit, so a
// decode command buffer can be recorded once and replayed for every token. Shaders that depend
// on where the chunk is read it (binding named `Step`, `readonly buffer Step { uint step[]; }`).
#ifndef INFER_SHADERS_STEP_H_
#define INFER_SHADERS_STEP_H_

#define INFER_STEP_POS0 0  // position of the chunk's first token
#define INFER_STEP_T 1     // tokens in the chunk (1 for decode)
#define INFER_STEP_IDS 4   // the chunk's T token ids start here
#define INFER_STEP_WORDS(max_chunk) (INFER_STEP_IDS + (max_chunk))

#endif  // INFER_SHADERS_STEP_H_
