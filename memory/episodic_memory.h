// The episodic memory the engine uses (DESIGN.md §5, issue 29 items 1 and 4): tokens leaving the
// window (or a quiet span read with read_kv) become episodes of N tokens whose rows are coded with
// SrvqCodec and stored with an association key in the EpisodeStore; recall scores every episode
// (association.h's dual score) and decodes the best into a KvBlock for set_recall.
// Two sides: ingesting (prepare_*: cutting, learning codecs, encoding; slow) and the store
// (commit, recall; quick). Each side is one caller at a time; prepare_* may run while recall or
// commit runs on another thread (actors/memory_link.h serialises the store side with a mutex
// that encoding never holds). ingest / flush / end_stream are prepare + commit, for one owner.
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
#include "memory/key_index.h"
#include "memory/recall_select.h"
#include "memory/srvq.h"
#include "memory/tiered_shapes.h"
#include "model/config.h"
#include "model/kv_ring_api.h"
#include "model/thread_pool.h"

namespace infer::memory {

struct MemoryOptions {
  std::string path = ".episodic.mem";
  uint32_t episode_tokens = 64;
  uint32_t capacity = 64;
  uint32_t recall_tokens = 64;   // R: the most tokens one recall places
  uint32_t train_tokens = 256;   // rows seen before the codecs and the association are learned
  float min_association = 0.2f;  // below this an episode is never recalled
  // Threads a recall's query key and decode use (a pool of their own; the turn waits for the
  // recall, so the forward's threads are idle meanwhile). 1: the calling thread only.
  int recall_threads = 1;
  AssociationConfig association;
  SrvqConfig srvq;               // dim is set per layer (its head dim)
  ScoreRule rule;
  // Test hook: runs on the ingesting thread before each episode is encoded.
  std::function<void()> before_encode;
};

// What recall decodes and scores with and ingesting encodes with: the codecs and the fitted
// association, immutable once learned (or loaded), so both sides share it without a lock.
struct Learned {
  std::vector<SrvqCodec> codecs;  // [layer * 2 + (0: K, 1: V)]
  Association assoc;
  std::vector<uint8_t> blob;      // the serialized form the store keeps
};

// Episodes encoded and ready to store (prepare_*'s result, commit's argument).
struct PreparedEpisodes {
  std::shared_ptr<const Learned> learned;  // what they were encoded with (null: no episodes)
  std::vector<Episode> episodes;           // info.id unset: the store assigns it
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
  int64_t written_ms = 0;
  int64_t recalled_ms = 0;
  uint32_t recalls = 0;  // after this recall
};

// Where the last recall's time went (milliseconds, steady clock), for the bench's breakdown.
struct RecallProfile {
  double query_key_ms = 0;  // the query's parts keyed (Association::query_key)
  double score_ms = 0;      // every stored key scored and the best chosen (RecallSelector)
  double decode_ms = 0;     // the chosen episodes read and decoded
  size_t rescored = 0;      // keys scored in fp32 (recall_select.h)
  bool fell_back = false;   // the fast selection started over on the exact one
};

// What happened to an episode, for whoever watches (the --serve protocol's MEMORY_EVENT).
struct MemoryEvent {
  enum Kind { kStored = 1, kRecalled = 2, kForgotten = 3, kReplaced = 4 } kind = kStored;
  uint64_t id = 0;
  int64_t pos0 = 0;
  uint32_t n_tokens = 0;
  double score = 0;       // kRecalled
  float association = 0;  // kRecalled
  float strength = 0;     // after the operation
};
// Called synchronously, by the thread that made the change, inside the facade's call.
using EventHook = std::function<void(const MemoryEvent&)>;

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

  // ingest / flush / end_stream in two halves. prepare_*: the slow half (cutting episodes,
  // learning the codecs once train_tokens rows were seen, encoding), on the ingesting side's
  // state and an immutable Learned only. commit: the quick half on the store side (the
  // codebooks once, then each episode, the weakest making room when full); returns how many
  // were stored. Every prepared batch must be committed, in order.
  Result<PreparedEpisodes> prepare_ingest(const KvBlock& b);
  Result<PreparedEpisodes> prepare_flush();
  Result<PreparedEpisodes> prepare_end_stream();
  Result<size_t> commit(PreparedEpisodes p);

  // Scores every stored episode against query's tokens and decodes the best (whole episodes,
  // best first, at most min(max_tokens, recall_tokens) tokens) into out, ready for set_recall.
  // hits: what was recalled, best first, with the strength it earned. Nothing is written: the
  // turn waits for this, not for the commit, which strengthen() makes afterwards.
  Result<void> recall(const KvBlock& query, size_t max_tokens, KvBlock* out,
                      std::vector<RecallHit>* hits);
  // Commits what a recall earned: each hit's strength, recall time and count.
  Result<void> strengthen(std::span<const RecallHit> hits);
  // The last recall's breakdown (zeros before the first).
  const RecallProfile& last_recall_profile() const { return profile_; }
  // Tests and benches: rank every key in fp32 (RecallSelector's exact path, the reference the
  // fast path must equal) instead of the coded first pass.
  void set_exact_recall(bool exact) { exact_recall_ = exact; }

  // The rows recall() places for the stored episode id, decoded from the store, without
  // scoring or strengthening it (tests compare them across processes; measurements place them).
  Result<void> decode(uint64_t id, KvBlock* out) const;

  const EpisodeStore& store() const { return *store_; }
  size_t key_floats() const { return assoc_.key_floats(); }

  // Removes an episode (kNotFound: no such id); reports kForgotten.
  Result<void> forget(uint64_t id);
  // An episode's strength decayed to now (what recall would score it with).
  float strength_now(const EpisodeInfo& info) const;
  int64_t now_ms() const { return now_(); }
  const MemoryOptions& options() const { return opts_; }
  // Every store, replacement, recall and forget is reported to hook (empty: none).
  void set_event_hook(EventHook hook) { hook_ = std::move(hook); }

 private:
  EpisodicMemory(std::vector<TieredShape> shapes, const MemoryOptions& opts, Detokenize d,
                 NowMs now);
  Result<std::shared_ptr<const Learned>> train(const KvBlock& rows) const;
  Result<std::shared_ptr<const Learned>> load_codebooks(std::span<const uint8_t> blob) const;
  std::vector<uint8_t> codebooks_blob(const Learned& l) const;
  // Cuts what builder_ completed (flush: and its tail) and encodes what can be.
  Result<PreparedEpisodes> prepare(std::vector<KvBlock> done, bool flush);
  Episode encode_episode(const Learned& l, const KvBlock& b) const;
  const EpisodeInfo* weakest(int64_t now) const;  // in index_; null when empty
  // pool: tokens decoded side by side (null: on the calling thread).
  void decode_episode(const Learned& l, const Episode& e, KvBlock* out, ThreadPool* pool) const;

  std::vector<TieredShape> shapes_;
  MemoryOptions opts_;
  Detokenize detokenize_;
  NowMs now_;
  Association assoc_;  // unfitted: the configuration and sizes every Learned starts from
  size_t payload_bytes_ = 0;
  // The ingesting side.
  EpisodeBuilder builder_;
  std::shared_ptr<const Learned> coder_;  // null until learned (or loaded)
  std::vector<KvBlock> waiting_;          // whole episodes waiting for training
  size_t seen_tokens_ = 0;
  // The store side: what recall uses (coder_ once committed).
  std::shared_ptr<const Learned> learned_;
  std::unique_ptr<EpisodeStore> store_;
  // store_'s keys, for recall and the weakest.
  KeyIndex index_{assoc_.key_floats(), size_t(assoc_.config().dims)};
  // A recall's working buffers, kept so that steady recalls allocate little.
  RecallSelector selector_;
  std::vector<float> query_key_;
  std::vector<RecallPick> picks_;
  // The query key's projections and the picked episodes' decode, split between threads while
  // the turn waits for its recall (null: one thread). Idle between recalls.
  std::unique_ptr<ThreadPool> recall_pool_;
  bool exact_recall_ = false;
  EventHook hook_;
  RecallProfile profile_;
  void report(const MemoryEvent& e) const {
    if (hook_) hook_(e);
  }
};

}  // namespace infer::memory
