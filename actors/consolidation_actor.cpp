// consolidation (DESIGN.md §3, §5): the debounce (once every input's turn has ended and no input
// comes for the debounce time, io gets the quiet span of positions since the last one) and,
// with episodic memory, the writing of episodes: rows the stream evicted, and the quiet span,
// which it asks the stream to read from the ring.
#include <cstdio>
#include <utility>

#include "actors/quiet_tracker.h"
#include "actors/stages.h"

namespace infer::actors {
namespace {

struct ConsolidationState {
  QuietTracker tracker;
  std::chrono::milliseconds debounce{0};
  WiringPtr wiring;
  Tracer* tracer = nullptr;
  std::shared_ptr<MemoryLink> link;
};

using Self = consolidation_actor::stateful_pointer<ConsolidationState>;

consolidation_actor::behavior_type consolidation_fn(Self self, std::chrono::milliseconds debounce,
                                                    WiringPtr wiring, Tracer* tracer,
                                                    std::shared_ptr<MemoryLink> link) {
  self->state.link = std::move(link);
  self->state.debounce = debounce;
  self->state.wiring = std::move(wiring);
  self->state.tracer = tracer;
  return {
      [=](const InputQueued& q) {
        TraceScope scope(self->state.tracer, "consolidation", "input", int64_t(q.turn));
        self->state.tracker.input();
      },
      [=](const TurnEnd& e) {
        ConsolidationState& s = self->state;
        TraceScope scope(s.tracer, "consolidation", "turn_end", int64_t(e.turn));
        if (const auto generation = s.tracker.turn_end(e.position)) {
          self->delayed_send(self, s.debounce, QuietTick{*generation});
        }
      },
      [=](const QuietTick& tick) {
        ConsolidationState& s = self->state;
        TraceScope scope(s.tracer, "consolidation", "tick");
        if (const auto span = s.tracker.fire(tick.generation)) {
          self->send(s.wiring->io, *span);
          if (s.link) self->send(s.wiring->stream, StoreSpan{span->from, span->to});
        }
      },
      [=](ResetDone) { self->state.tracker.reset(); },
      [=](DrainMemory) {
        ConsolidationState& s = self->state;
        TraceScope scope(s.tracer, "consolidation", "memory store");
        if (s.link) s.link->drain();
      },
      [=](StreamRestart) {
        ConsolidationState& s = self->state;
        if (!s.link) return;
        s.link->drain();  // the old stream's rows first
        const Result<size_t> stored = s.link->end_stream();
        if (!stored.ok()) std::fprintf(stderr, "infer: memory: %s\n", stored.error().message.c_str());
      },
  };
}

}  // namespace

consolidation_actor spawn_consolidation(caf::actor_system& sys,
                                        std::chrono::milliseconds debounce, WiringPtr wiring,
                                        Tracer* tracer, std::shared_ptr<MemoryLink> link) {
  // Detached: encoding an episode takes milliseconds to seconds; the scheduler's workers carry
  // the per-token messages and must not wait behind it.
  return sys.spawn<caf::detached>(consolidation_fn, debounce, std::move(wiring), tracer,
                                  std::move(link));
}

}  // namespace infer::actors
