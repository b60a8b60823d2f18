// consolidation: for now only the debounce (DESIGN.md §3): once every input's turn has ended
// and no input comes for the debounce time, io gets the quiet span of positions since the last
// one. The memory issue fills the span into episodic memory here.
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
};

using Self = consolidation_actor::stateful_pointer<ConsolidationState>;

consolidation_actor::behavior_type consolidation_fn(Self self, std::chrono::milliseconds debounce,
                                                    WiringPtr wiring, Tracer* tracer) {
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
        if (const auto span = s.tracker.fire(tick.generation)) self->send(s.wiring->io, *span);
      },
      [=](ResetDone) { self->state.tracker.reset(); },
  };
}

}  // namespace

consolidation_actor spawn_consolidation(caf::actor_system& sys,
                                        std::chrono::milliseconds debounce, WiringPtr wiring,
                                        Tracer* tracer) {
  return sys.spawn(consolidation_fn, debounce, std::move(wiring), tracer);
}

}  // namespace infer::actors
