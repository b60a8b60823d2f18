// recall (DESIGN.md §3, §5): scores the episodic store against a turn's input rows and decodes
// the best episodes' rows for the stream to place in the ring's recall tier. It runs on the
// scheduler, not the decode thread; the stream waits for the answer at most
// MemoryLink::recall_wait before generating without it.
#include <algorithm>
#include <cstdio>
#include <utility>

#include "actors/stages.h"

namespace infer::actors {
namespace {

struct RecallState {
  std::shared_ptr<MemoryLink> link;
  Tracer* tracer = nullptr;
};

using Self = recall_actor::stateful_pointer<RecallState>;

recall_actor::behavior_type recall_fn(Self self, std::shared_ptr<MemoryLink> link,
                                      Tracer* tracer) {
  self->state.link = std::move(link);
  self->state.tracer = tracer;
  return {
      [=](const RecallRequest& req) {
        RecallState& s = self->state;
        RecallSlot& slot = *req.slot;
        TraceScope scope(s.tracer, "recall", "memory recall", int64_t(slot.query.size()));
        const Result<void> r = s.link->recall(slot.query, slot.turn, &slot.rows, &slot.hits);
        std::vector<memory::RecallHit> hits;
        {
          std::lock_guard lock(slot.mu);
          if (!r.ok()) slot.error = r.error();
          if (r.ok()) hits = slot.hits;
          slot.done = true;
          slot.cv.notify_all();
        }
        // The turn has its rows: the strengths it earned are committed after, off its path.
        if (!hits.empty()) {
          TraceScope commit(s.tracer, "recall", "memory strengthen", int64_t(hits.size()));
          if (Result<void> w = s.link->strengthen(hits); !w.ok()) {
            std::fprintf(stderr, "infer: memory: %s\n", w.error().message.c_str());
          }
        }
      },
  };
}

}  // namespace

void recall_for_turn(MemoryLink& link, const Wiring& wiring, Forward& forward, Tracer* tracer,
                     int64_t pos, int64_t n) {
  KvRingAccess* ring = forward.kv_ring();
  if (ring == nullptr || n <= 0) return;
  // The query: the new input that is fed (all but its last id) and still in the ring, at most
  // its newest kMaxRecall tokens (a long paste is represented by its end, what the model will
  // continue from).
  const int64_t end = forward.position();
  int64_t begin = std::max(pos, end - kMaxRecall);
  while (begin < end && ring->ring().find(begin) < 0) ++begin;
  if (begin >= end) return;
  auto slot = std::make_shared<RecallSlot>();
  slot->turn = link.running_turn.load();
  if (!ring->read_kv(begin, end - begin, &slot->query).ok()) return;
  TraceScope scope(tracer, "stream", "memory recall wait", end - begin);
  caf::anon_send(wiring.recall, RecallRequest{slot});
  std::unique_lock lock(slot->mu);
  if (!slot->cv.wait_for(lock, link.recall_wait, [&] { return slot->done; })) {
    // Recall or a commit took too long (encoding never holds the store): this turn goes without.
    TraceScope late(tracer, "stream", "memory recall late", link.recall_wait.count());
    return;
  }
  if (slot->error) {
    std::fprintf(stderr, "infer: memory: %s\n", slot->error->message.c_str());
    return;
  }
  if (slot->rows.size() == 0) return;  // nothing associated: the tier keeps what it held
  TraceScope place(tracer, "stream", "memory place", int64_t(slot->rows.size()));
  if (const Result<void> r = ring->set_recall(slot->rows); !r.ok()) {
    std::fprintf(stderr, "infer: memory: %s\n", r.error().message.c_str());
  }
}

recall_actor spawn_recall(caf::actor_system& sys, std::shared_ptr<MemoryLink> link,
                          Tracer* tracer) {
  return sys.spawn(recall_fn, std::move(link), tracer);
}

}  // namespace infer::actors
