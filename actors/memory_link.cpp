#include "actors/memory_link.h"

#include <cstdio>
#include <utility>

namespace infer::actors {

void MemoryLink::push(EpisodeRows rows) {
  std::lock_guard lock(queue_mu);
  queue.push_back(std::move(rows));
}

// An error is reported on stderr and the conversation goes on: memory is an aid, and a full
// disk must not end the session.
void MemoryLink::drain() {
  std::lock_guard order(drain_mu);
  std::vector<EpisodeRows> batch;
  {
    std::lock_guard lock(queue_mu);
    batch.swap(queue);
  }
  for (EpisodeRows& r : batch) {
    const Result<size_t> stored = store(*r.rows, r.flush, r.cause_ticket);
    if (!stored.ok()) std::fprintf(stderr, "infer: memory: %s\n", stored.error().message.c_str());
    if (r.from_buffer && buffer) buffer->recycle(std::move(r.rows));
  }
}

Result<size_t> MemoryLink::store(const KvBlock& rows, bool flush, uint64_t ticket) {
  std::lock_guard ingest(ingest_mu);
  INFER_TRY(const size_t stored, commit(memory->prepare_ingest(rows), ticket));
  if (!flush) return stored;
  INFER_TRY(const size_t tail, commit(memory->prepare_flush(), ticket));
  return stored + tail;
}

Result<size_t> MemoryLink::end_stream() {
  std::lock_guard ingest(ingest_mu);
  return commit(memory->prepare_end_stream(), 0);
}

Result<size_t> MemoryLink::commit(Result<memory::PreparedEpisodes> prepared, uint64_t ticket) {
  if (!prepared.ok()) return prepared.error();
  std::lock_guard lock(mu);
  cause_ticket = ticket;  // the events the commit raises are this operation's
  cause_turn = 0;
  Result<size_t> stored = memory->commit(std::move(prepared).value());
  cause_ticket = 0;
  return stored;
}

Result<void> MemoryLink::recall(const KvBlock& query, uint64_t turn, KvBlock* rows,
                                std::vector<memory::RecallHit>* hits) {
  std::lock_guard lock(mu);
  cause_ticket = 0;
  cause_turn = turn;
  const Result<void> r = memory->recall(query, size_t(recall_tokens), rows, hits);
  cause_turn = 0;
  INFER_TRY_VOID(r);
  last_hits = *hits;
  return Ok{};
}

Result<void> MemoryLink::strengthen(std::span<const memory::RecallHit> hits) {
  if (hits.empty()) return Ok{};
  std::lock_guard lock(mu);
  return memory->strengthen(hits);
}

}  // namespace infer::actors
