// Episodic memory in the pipeline (DESIGN.md §3, §5): what the stream, consolidation and recall
// stages share, and the messages between them. The stream hands evicted rows over (an
// EvictionBuffer's blocks) and goes on; consolidation writes them as episodes; recall scores the
// store against a turn's input and hands back rows the stream places in the ring's recall tier.
// One EpisodicMemory, its two sides (episodic_memory.h) behind two mutexes: consolidation
// encodes holding only ingest_mu and takes mu for the quick commit; recall takes mu alone, so a
// turn's recall never waits for an encode. The decode thread takes neither.
#pragma once

#include <caf/all.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "base/result.h"
#include "memory/episodic_memory.h"
#include "memory/eviction_buffer.h"
#include "model/kv_ring_api.h"

namespace infer::actors {

struct EpisodeRows;

struct MemoryLink {
  std::mutex mu;         // the store side of memory (commit, recall, the store) and last_hits
  std::mutex ingest_mu;  // the ingesting side of memory (prepare_*); taken before mu, never after
  std::unique_ptr<memory::EpisodicMemory> memory;
  std::vector<memory::RecallHit> last_hits;  // the latest recall, best first (REPL /memory)
  int64_t recall_tokens = 96;                // R: the ring's recall tier
  // How long a turn waits for its recall before generating without it.
  std::chrono::milliseconds recall_wait{200};
  int64_t episode_tokens = 64;
  std::shared_ptr<memory::EvictionBuffer> buffer;  // set by the stream stage
  // Who the operation holding mu works for (MemoryNotice's cause): a MemoryOp's ticket, a
  // generating turn (its automatic recall), or neither (background consolidation).
  uint64_t cause_ticket = 0, cause_turn = 0;
  // The turn the stream is running (0: none), for the automatic recall's cause.
  std::atomic<uint64_t> running_turn{0};
  // One drain at a time, so that rows are stored in the order they were queued even when the
  // stream drains for a MemoryOp while consolidation drains too.
  std::mutex drain_mu;

  // Rows waiting to be stored, in the order the stream handed them over: a queue rather than
  // messages so that whatever is still waiting when the pipeline stops is stored (drain()).
  std::mutex queue_mu;
  std::vector<EpisodeRows> queue;
  // Hands rows over (any thread; the consolidation stage is told to drain).
  void push(EpisodeRows rows);
  // Stores everything queued (consolidation's thread, or the pipeline's after its actors).
  void drain();
  // Stores rows (flush: and the partial tail): encodes under ingest_mu, commits under mu.
  // ticket: the MemoryOp that asked (0: background), the events' cause.
  Result<size_t> store(const KvBlock& rows, bool flush, uint64_t ticket = 0);
  // The conversation restarts at position 0: what waits is stored, positions taken afresh.
  Result<size_t> end_stream();
  // A turn's recall into rows and hits (kept in last_hits too), under mu. turn: the generating
  // turn it is for (the events' cause), 0 for none.
  Result<void> recall(const KvBlock& query, uint64_t turn, KvBlock* rows,
                      std::vector<memory::RecallHit>* hits);
  // Commits what a recall earned (EpisodicMemory::strengthen), under mu: after the rows are
  // placed, so the turn never waits for the disk.
  Result<void> strengthen(std::span<const memory::RecallHit> hits);

 private:
  Result<size_t> commit(Result<memory::PreparedEpisodes> prepared, uint64_t ticket);  // under mu
};

// Rows to store: evicted (a block of buffer's, which gets it back), or a quiet span read from
// the ring (flush: the partial tail is stored too).
struct EpisodeRows {
  std::unique_ptr<KvBlock> rows;
  bool flush = false;
  bool from_buffer = false;
  uint64_t cause_ticket = 0;  // the MemoryOp that asked for them (0: background)
};

// stream -> consolidation: rows are queued in the MemoryLink.
struct DrainMemory {};

// consolidation -> stream: read positions [from, to) still in the ring and send them as
// EpisodeRows with flush (the quiet conversation becomes episodes now).
struct StoreSpan {
  int64_t from = 0;
  int64_t to = 0;
};

// stream -> recall and back through the slot: a turn's query rows and what to place.
struct RecallSlot {
  uint64_t turn = 0;  // the generating turn it is for (the events' cause)
  KvBlock query;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  KvBlock rows;
  std::vector<memory::RecallHit> hits;
  std::optional<Error> error;
};
struct RecallRequest {
  std::shared_ptr<RecallSlot> slot;
};

// stream -> consolidation: the conversation restarts at position 0 (after a reset).
struct StreamRestart {};

}  // namespace infer::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(infer::actors::RecallRequest)
