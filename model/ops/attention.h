// Causal / sliding-window attention of one layer over its KV cache plus the current chunk
// (GEMMA4_TEXT.md §4.5, §4.7, §5). Scores are plain q·k (scale 1.0), softmax in fp32.
#pragma once

#include <cstdint>

namespace infer {

class ThreadPool;

// Where one layer's keys and values are. The cache is a ring of `slots` entries [slots, n_kv, d]
// holding positions [cache_begin, pos0) at slot pos % slots; the chunk's own K/V are
// [T, n_kv, d] at positions pos0 .. pos0+T-1 (a KV-shared layer passes its donor's, §5).
struct KvView {
  const float* cache_k = nullptr;
  const float* cache_v = nullptr;
  int64_t slots = 0;
  int64_t cache_begin = 0;
  const float* chunk_k = nullptr;
  const float* chunk_v = nullptr;
};

struct AttentionShape {
  int64_t T = 0;       // queries in the chunk
  int64_t pos0 = 0;    // position of the first query
  int64_t n_q = 0;     // query heads
  int64_t n_kv = 0;    // KV heads; query head h reads KV head h / (n_q / n_kv) (§4.5)
  int64_t d = 0;       // head dim
  int64_t window = 0;  // W for sliding layers (key s allowed iff p - W < s <= p); 0 = full
};

// Scratch for splitting one token's keys over workers: `n_workers` rows of `row_floats` floats,
// each holding one worker's partial softmax state. A row shorter than
// attention_partial_floats(n_q, d) (or one worker) disables the split; nothing else needs it.
struct AttentionScratch {
  float* partial = nullptr;
  int64_t row_floats = 0;
  int n_workers = 0;
};

// Floats of one worker's partial state: o [n_q, d], max [n_q], sum [n_q].
int64_t attention_partial_floats(int64_t n_q, int64_t d);

// q: [T, n_q, d] f32 (normed and rotated) -> out: [T, n_q, d] f32. Runs on `pool` when the work is
// large enough to pay for it (a single token splits its keys over the workers); allocates nothing.
void attention(const float* q, const AttentionShape& s, const KvView& kv, float* out,
               const AttentionScratch& scratch, ThreadPool& pool);

// The plain reference: per (token, head) a scores row, max-subtracted softmax with a double sum,
// weighted sum of V. Allocates; for tests.
void attention_reference(const float* q, const AttentionShape& s, const KvView& kv, float* out);

// The most keys one query can see: W on a sliding layer, every position on a full one.
int64_t attention_max_keys(int64_t window, int64_t max_positions);

}  // namespace infer
