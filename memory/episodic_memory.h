// The episodic memory the engine uses (DESIGN.md §5, issue 29 items 1 and 4): tokens leaving the
// window (or a quiet span read with read_kv) become episodes of N tokens whose rows are coded with
// SrvqCodec and stored with an association key in the EpisodeStore; recall scores every episode
// (association.h's dual score) and decodes the best into a KvBlock for set_recall.
// Not thread-safe: one owner (the recall / consolidation actors serialise their calls).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "memory/association.h"
#include "memory/episode_builder.h"
#include "memory/episode_store.h"
#include "memory/srvq.h"
#include "model/config.h"
#include "model/kv_ring_api.h"

namespace infer::memory {

// One tiered layer's row shape (K and V alike): [n_kv, d].
struct TieredShape {
  int layer = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;
  int row_floats() const { return num_key_value_heads * head_dim; }
};
// The tiered layers of cfg: full-attention layers that compute K/V (not KV-shared), ascending.
std::vector<TieredShape> tiered_shapes(const ModelConfig& cfg);
// FNV-1a 64 over the config fields and tensor shapes that make rows comparable.
uint64_t model_fingerprint(const ModelConfig& cfg);

struct MemoryOptions {
  std::string path = ".episodic.mem";
  uint32_t episode_tokens = 64;
  uint32_t capacity = 64;
  uint32_t recall_tokens = 64;   // R: the most tokens one recall places
  uint32_t train_tokens = 256;   // rows seen before the codecs and the association are learned
  float min_association = 0.2f;  // below this an episode is never recalled
  AssociationConfig association;
  SrvqConfig srvq;               // dim is set per layer (its head dim)
  ScoreRule rule;
};

// ids -> UTF-8 text, for the previews --mem-list and QUERY show.
using Detokenize = std::function<std::string(std::span<const int32_t>)>;
// Milliseconds since the Unix epoch (tests pass a fake clock).
using NowMs = std::function<int64_t()>;

struct RecallHit {
  uint64_t id = 0;
  int64_t pos0 = 0;
  uint32_t n_tokens = 0;
  float association = 0;
  double score = 0;
  float strength = 0;  // after this recall
};

class EpisodicMemory {
 public:
  static Result<std::unique_ptr<EpisodicMemory>> open(const ModelConfig& cfg,
                                                      const MemoryOptions& opts,
                                                      Detokenize detokenize, NowMs now = {});
  ~EpisodicMemory();

  // Takes a chunk of tokens (eviction or a quiet span; positions ascending; positions already
  // taken are skipped) and stores every episode it completes. Returns how many were stored.
  // Until train_tokens rows have been seen, whole episodes wait in memory (untrained codecs).
  Result<size_t> ingest(const KvBlock& b);
  // Stores the partial tail and anything waiting for training (trains on what there is).
  Result<size_t> flush();
  // The conversation starts again at position 0 (a reset): flushes what waits, then takes
  // positions afresh.
  Result<size_t> end_stream();

  // Scores every stored episode against query's tokens, decodes the best (whole episodes, best
  // first, at most min(max_tokens, recall_tokens) tokens) into out, ready for set_recall, and
  // strengthens them. hits: what was recalled, best first (may be null).
  Result<void> recall(const KvBlock& query, size_t max_tokens, KvBlock* out,
                      std::vector<RecallHit>* hits);

  // The rows recall() places for the stored episode id, decoded from the store, without
  // scoring or strengthening it (tests compare them across processes; measurements place them).
  Result<void> decode(uint64_t id, KvBlock* out) const;

  const EpisodeStore& store() const { return *store_; }
  size_t key_floats() const { return assoc_.key_floats(); }

 private:
  EpisodicMemory(std::vector<TieredShape> shapes, const MemoryOptions& opts, Detokenize d,
                 NowMs now);
  Result<void> train(const KvBlock& rows);
  Result<void> load_codebooks(std::span<const uint8_t> blob);
  std::vector<uint8_t> codebooks_blob() const;
  Result<void> store_episode(const KvBlock& e);
  uint64_t weakest(int64_t now) const;
  void decode_episode(const Episode& e, KvBlock* out) const;

  std::vector<TieredShape> shapes_;
  MemoryOptions opts_;
  Detokenize detokenize_;
  NowMs now_;
  Association assoc_;
  EpisodeBuilder builder_;
  std::vector<SrvqCodec> codecs_;  // [layer * 2 + (0: K, 1: V)], empty until trained
  std::vector<KvBlock> waiting_;   // whole episodes waiting for training
  size_t seen_tokens_ = 0;
  std::unique_ptr<EpisodeStore> store_;
};

}  // namespace infer::memory
