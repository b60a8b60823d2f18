// Episodic memory on request (events.h MemoryOp), run on the stream's thread between turns so
// that each sees the conversation as the input before it left it: a recall's query joins the
// context and is recalled from at once, a store makes episodes of the window now. The store and
// the scores are the facade's (memory/episodic_memory.h), under the link's mutex.
#include <algorithm>
#include <utility>

#include "actors/stages.h"

namespace infer::actors {
namespace {

MemoryEntry entry_of(const memory::EpisodeInfo& i, float strength) {
  MemoryEntry e;
  e.id = i.id;
  e.pos0 = i.pos0;
  e.n_tokens = i.n_tokens;
  e.strength = strength;
  e.written_ms = i.written_ms;
  e.recalled_ms = i.recalled_ms;
  e.preview = i.preview;
  return e;
}

MemoryEntry entry_of(const memory::RecallHit& h) {
  MemoryEntry e;
  e.id = h.id;
  e.pos0 = h.pos0;
  e.n_tokens = h.n_tokens;
  e.strength = h.strength;
  e.score = h.score;
  e.association = h.association;
  e.written_ms = h.written_ms;
  return e;
}

void fail(MemoryReply& r, const Error& e) {
  r.ok = false;
  r.code = e.code;
  r.error = e.message;
}

// The positions [from, to) still in the ring, as runs of consecutive positions (the anchors and
// the window are apart once the stream has evicted; mass eviction leaves holes).
std::vector<std::pair<int64_t, int64_t>> runs_in_ring(const KvRing& ring, int64_t from,
                                                      int64_t to) {
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (int64_t p = from; p < to; ++p) {
    if (ring.find(p) < 0) continue;
    if (!runs.empty() && runs.back().second == p) {
      ++runs.back().second;
    } else {
      runs.emplace_back(p, p + 1);
    }
  }
  return runs;
}

// The query joins the conversation (like APPEND_TEXT), is fed, and its rows still in the ring
// are scored against the store; the best episodes replace the recall tier now.
void recall(MemoryLink& link, Engine& engine, const MemoryOp& op, MemoryReply& r) {
  KvRingAccess* ring = engine.forward().kv_ring();
  const int64_t pos = engine.position();
  class Quiet : public TokenSink {
    Verdict token(const Step&) override { return Verdict::kKeep; }
  } sink;
  TurnRequest req;
  req.input = op.ids;
  const int64_t prefilled0 = engine.prefilled();
  const double prefill_ms0 = engine.prefill_ms();
  const TurnOutcome o = engine.run_turn(req, sink);
  r.position = engine.position();
  if (o.error) return fail(r, *o.error);
  if (Result<bool> fed = engine.feed(nullptr); !fed.ok()) return fail(r, fed.error());  // all
  r.prefilled = engine.prefilled() - prefilled0;
  r.prefill_ms = engine.prefill_ms() - prefill_ms0;
  engine.skip_before_generate();  // the next GENERATE recalls from what comes after
  KvBlock query, rows;
  const int64_t end = engine.fed();
  const auto runs = runs_in_ring(ring->ring(), std::max(pos, end - kMaxRecall), end);
  if (!runs.empty()) {  // the newest run: the query's end, what the model will continue from
    if (Result<void> read = ring->read_kv(runs.back().first, runs.back().second - runs.back().first,
                                          &query);
        !read.ok()) {
      return fail(r, read.error());
    }
  }
  std::vector<memory::RecallHit> hits;
  {
    std::lock_guard lock(link.mu);
    link.cause_ticket = op.ticket;
    link.cause_turn = 0;
    const Result<void> done =
        link.memory->recall(query, size_t(link.recall_tokens), &rows, &hits);
    link.cause_ticket = 0;
    if (!done.ok()) return fail(r, done.error());
    link.last_hits = hits;
  }
  for (const memory::RecallHit& h : hits) r.entries.push_back(entry_of(h));
  if (rows.size() > 0) {  // else nothing associated: the tier keeps what it held
    if (Result<void> placed = ring->set_recall(rows); !placed.ok()) return fail(r, placed.error());
  }
  if (!hits.empty()) {  // what the recall earned, committed once the rows are placed
    std::lock_guard lock(link.mu);
    if (Result<void> w = link.memory->strengthen(hits); !w.ok()) fail(r, w.error());
  }
}

// The window's tokens not yet stored become episodes now (the partial tail too), after the
// evicted rows still waiting: the quiet span's path (StoreSpan), waited for.
void store(MemoryLink& link, Engine& engine, const MemoryOp& op, MemoryReply& r) {
  KvRingAccess* ring = engine.forward().kv_ring();
  // What is appended but not yet read (an input's last id waits for the next generation) is
  // read now, so that every appended token can be stored.
  const int64_t prefilled0 = engine.prefilled();
  const double prefill_ms0 = engine.prefill_ms();
  if (Result<bool> fed = engine.feed(nullptr); !fed.ok()) return fail(r, fed.error());
  r.prefilled = engine.prefilled() - prefilled0;
  r.prefill_ms = engine.prefill_ms() - prefill_ms0;
  if (link.buffer) link.buffer->flush();
  uint64_t first_id = 0;
  {
    std::lock_guard lock(link.mu);
    first_id = link.memory->store().next_id();
  }
  const KvRing& k = ring->ring();
  const int64_t end = engine.fed();
  // Old enough to cover the anchors and every window slot, even one mass eviction kept long.
  const int64_t from = std::max<int64_t>(0, end - 4 * (k.capacity()));
  const auto runs = runs_in_ring(k, from, end);
  for (size_t i = 0; i < runs.size(); ++i) {
    auto rows = std::make_unique<KvBlock>();
    if (Result<void> read = ring->read_kv(runs[i].first, runs[i].second - runs[i].first,
                                          rows.get());
        !read.ok()) {
      return fail(r, read.error());
    }
    link.push(EpisodeRows{std::move(rows), i + 1 == runs.size(), false, op.ticket});
  }
  link.drain();  // returns once every row queued so far is stored, whoever drained it
  std::lock_guard lock(link.mu);
  for (const memory::EpisodeInfo& i : link.memory->store().list()) {
    if (i.id >= first_id) r.entries.push_back(entry_of(i, i.strength));
  }
}

void query(MemoryLink& link, const MemoryOp& op, MemoryReply& r) {
  std::lock_guard lock(link.mu);
  const memory::EpisodicMemory& m = *link.memory;
  const std::vector<memory::EpisodeInfo> all = m.store().list();
  r.total = all.size();
  r.capacity = m.store().geometry().capacity;
  r.path = m.store().path();
  const size_t first = std::min<size_t>(op.first, all.size());
  const size_t n = std::min<size_t>(op.max_count, all.size() - first);
  for (size_t i = first; i < first + n; ++i) {
    r.entries.push_back(entry_of(all[i], m.strength_now(all[i])));
  }
  for (const memory::RecallHit& h : link.last_hits) r.last_hits.push_back(entry_of(h));
}

}  // namespace

MemoryReply run_memory_op(MemoryLink* link, Engine& engine, const MemoryOp& op, Tracer* tracer) {
  MemoryReply r;
  r.ticket = op.ticket;
  r.kind = op.kind;
  if (!op.refused.empty()) {
    fail(r, Error{ErrorCode::kInvalidArgument, op.refused});
  } else if (link == nullptr || engine.forward().kv_ring() == nullptr) {
    fail(r, Error{ErrorCode::kUnsupported, "episodic memory is off (start infer with --memory)"});
  } else {
    switch (op.kind) {
      case MemoryOpKind::kRecall: {
        TraceScope scope(tracer, "stream", "memory recall request", int64_t(op.ids.size()));
        recall(*link, engine, op, r);
        break;
      }
      case MemoryOpKind::kStore: {
        TraceScope scope(tracer, "stream", "memory store request");
        store(*link, engine, op, r);
        break;
      }
      case MemoryOpKind::kForget: {
        TraceScope scope(tracer, "stream", "memory forget");
        std::lock_guard lock(link->mu);
        link->cause_ticket = op.ticket;
        link->cause_turn = 0;
        const Result<void> gone = link->memory->forget(op.episode_id);
        link->cause_ticket = 0;
        if (!gone.ok()) fail(r, gone.error());
        MemoryEntry e;
        e.id = op.episode_id;
        r.entries.push_back(e);
        break;
      }
      case MemoryOpKind::kQuery: {
        TraceScope scope(tracer, "stream", "memory query");
        query(*link, op, r);
        break;
      }
      case MemoryOpKind::kDrain: {
        TraceScope scope(tracer, "stream", "memory drain");
        if (link->buffer) link->buffer->flush();
        link->drain();
        break;
      }
    }
  }
  if (link != nullptr) {
    std::lock_guard lock(link->mu);
    r.now_ms = link->memory->now_ms();
  }
  return r;
}

}  // namespace infer::actors
