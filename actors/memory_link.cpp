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
  std::vector<EpisodeRows> batch;
  {
    std::lock_guard lock(queue_mu);
    batch.swap(queue);
  }
  for (EpisodeRows& r : batch) {
    const Result<size_t> stored = store(*r.rows, r.flush);
    if (!stored.ok()) std::fprintf(stderr, "infer: memory: %s\n", stored.error().message.c_str());
    if (r.from_buffer && buffer) buffer->recycle(std::move(r.rows));
  }
}

Result<size_t> MemoryLink::store(const KvBlock& rows, bool flush) {
  std::lock_guard ingest(ingest_mu);
  INFER_TRY(const size_t stored, commit(memory->prepare_ingest(rows)));
  if (!flush) return stored;
  INFER_TRY(const size_t tail, commit(memory->prepare_flush()));
  return stored + tail;
}

Result<size_t> MemoryLink::end_stream() {
  std::lock_guard ingest(ingest_mu);
  return commit(memory->prepare_end_stream());
}

Result<size_t> MemoryLink::commit(Result<memory::PreparedEpisodes> prepared) {
  if (!prepared.ok()) return prepared.error();
  std::lock_guard lock(mu);
  return memory->commit(std::move(prepared).value());
}

Result<void> MemoryLink::recall(const KvBlock& query, KvBlock* rows,
                                std::vector<memory::RecallHit>* hits) {
  std::lock_guard lock(mu);
  INFER_TRY_VOID(memory->recall(query, size_t(recall_tokens), rows, hits));
  last_hits = *hits;
  return Ok{};
}

}  // namespace infer::actors
