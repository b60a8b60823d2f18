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
    {
      std::lock_guard lock(mu);
      cause_ticket = r.cause_ticket;
      cause_turn = 0;
      Result<size_t> stored = memory->ingest(*r.rows);
      if (stored.ok() && r.flush) stored = memory->flush();
      if (!stored.ok()) std::fprintf(stderr, "infer: memory: %s\n", stored.error().message.c_str());
      cause_ticket = 0;
    }
    if (r.from_buffer && buffer) buffer->recycle(std::move(r.rows));
  }
}

}  // namespace infer::actors
