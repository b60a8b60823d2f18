// gate: judges every token the stream sends (Gate::decide), marks it with the decision and
// passes it on to the tokenizer; a listen or act decision stops the stream's turn through
// Control, within kGateLead tokens. Urgency comes from the inputs io has queued.
#include <utility>

#include "actors/stages.h"

namespace infer::actors {
namespace {

struct GateState {
  std::unique_ptr<Gate> gate;
  std::shared_ptr<Control> control;
  WiringPtr wiring;
  Tracer* tracer = nullptr;
  uint64_t last_queued = 0;  // the latest input turn io has sent
  int64_t speak = 0, listen = 0, act = 0;
};

using Self = gate_actor::stateful_pointer<GateState>;

gate_actor::behavior_type gate_fn(Self self, Gate gate, std::shared_ptr<Control> control,
                                  WiringPtr wiring, Tracer* tracer) {
  self->state.gate = std::make_unique<Gate>(std::move(gate));
  self->state.control = std::move(control);
  self->state.wiring = std::move(wiring);
  self->state.tracer = tracer;
  return {
      [=](TokenEvent& t) {
        GateState& s = self->state;
        if (t.inserted()) {  // not sampled: nothing to decide, and not part of the gate's lead
          self->send(s.wiring->tokenizer, std::move(t));
          return;
        }
        TraceScope scope(s.tracer, "gate", "token", t.step);
        GateContext ctx;
        ctx.pending_inputs = s.last_queued > t.turn ? int64_t(s.last_queued - t.turn) : 0;
        ctx.tokens_left = t.tokens_left;
        t.decision = s.gate->decide(t, ctx);
        switch (t.decision) {
          case Decision::kSpeak:
            ++s.speak;
            break;
          case Decision::kListen:
            ++s.listen;
            break;
          case Decision::kAct:
            ++s.act;
            break;
        }
        Control& c = *s.control;
        if (t.decision != Decision::kSpeak) c.gate_stop_turn.store(t.turn);
        c.gate_seen.fetch_add(1);
        c.gate_seen.notify_one();
        self->send(s.wiring->tokenizer, std::move(t));
      },
      [=](TurnEnd& e) {
        TraceScope scope(self->state.tracer, "gate", "turn_end", int64_t(e.turn));
        self->send(self->state.wiring->tokenizer, std::move(e));
      },
      [=](const InputAppended& a) { self->send(self->state.wiring->tokenizer, a); },
      [=](ToolEvent& e) { self->send(self->state.wiring->tokenizer, std::move(e)); },
      [=](const InputQueued& q) {
        TraceScope scope(self->state.tracer, "gate", "input", int64_t(q.turn));
        self->state.last_queued = std::max(self->state.last_queued, q.turn);
      },
      [=](PipelineStats& st) {
        GateState& s = self->state;
        TraceScope scope(s.tracer, "gate", "stats");
        st.speak = s.speak;
        st.listen = s.listen;
        st.act = s.act;
        return std::move(st);
      },
      [=](reset_atom) {
        GateState& s = self->state;
        TraceScope scope(s.tracer, "gate", "reset");
        s.speak = s.listen = s.act = 0;
        return self->delegate(s.wiring->tokenizer, ResetDone{});
      },
      [=](Failure& f) { self->send(self->state.wiring->tokenizer, std::move(f)); },
  };
}

}  // namespace

gate_actor spawn_gate(caf::actor_system& sys, Gate gate, std::shared_ptr<Control> control,
                      WiringPtr wiring, Tracer* tracer) {
  return sys.spawn(gate_fn, std::move(gate), std::move(control), std::move(wiring), tracer);
}

}  // namespace infer::actors
