// io: the front end's actor (DESIGN.md §3). Input from Pipeline goes on to the tokenizer, and
// io tells the gate (urgency) and consolidation (debounce) that it came; every event out is
// handed to the FrontEnd on this actor's own thread, in order. Stats and reset requests start
// down the input's path here.
#include <utility>

#include "actors/stages.h"

namespace infer::actors {
namespace {

struct IoState {
  FrontEnd* front_end = nullptr;
  WiringPtr wiring;
  Tracer* tracer = nullptr;
};

using Self = io_actor::stateful_pointer<IoState>;

io_actor::behavior_type io_fn(Self self, FrontEnd* front_end, WiringPtr wiring, Tracer* tracer) {
  self->state.front_end = front_end;
  self->state.wiring = std::move(wiring);
  self->state.tracer = tracer;
  return {
      [=](InputMsg& in) {
        IoState& s = self->state;
        TraceScope scope(s.tracer, "io", "input", int64_t(in.turn));
        self->send(s.wiring->gate, InputQueued{in.turn});
        self->send(s.wiring->consolidation, InputQueued{in.turn});
        self->send(s.wiring->tokenizer, std::move(in));
      },
      [=](const TokenEvent& t) {
        TraceScope scope(self->state.tracer, "io", "token", t.step);
        self->state.front_end->token(t);
      },
      [=](const TurnEnd& e) {
        TraceScope scope(self->state.tracer, "io", "turn_end", int64_t(e.turn));
        self->state.front_end->turn_end(e);
      },
      [=](const InputAppended& a) { self->state.front_end->appended(a); },
      [=](const ToolEvent& e) {
        TraceScope scope(self->state.tracer, "io", "tool event", int64_t(e.call_id));
        self->state.front_end->tool_event(e);
      },
      [=](const QuietSpan& q) {
        TraceScope scope(self->state.tracer, "io", "quiet");
        self->state.front_end->quiet(q);
      },
      [=](const Failure& f) { self->state.front_end->error(error_event(f.error)); },
      [=](stats_atom a, bool with_context) {
        return self->delegate(self->state.wiring->tokenizer, a, with_context);
      },
      [=](MemoryOp& op) {  // down the input's path, so it follows the turns sent before it
        const uint64_t ticket = op.ticket;
        const MemoryOpKind kind = op.kind;
        self->request(self->state.wiring->tokenizer, caf::infinite, std::move(op))
            .then([=](MemoryReply& r) { self->state.front_end->memory_reply(r); },
                  [=](caf::error& e) {
                    MemoryReply r;
                    r.ticket = ticket;
                    r.kind = kind;
                    r.ok = false;
                    const ErrorEvent ev = error_event(e);
                    r.code = ev.code;
                    r.error = ev.message;
                    self->state.front_end->memory_reply(r);
                  });
      },
      [=](const MemoryNotice& n) { self->state.front_end->memory_event(n); },
      [=](SetPreamble& p) { self->send(self->state.wiring->tokenizer, std::move(p)); },
      [=](reset_atom a) {
        self->request(self->state.wiring->tokenizer, caf::infinite, a)
            .then([=](ResetDone) { self->state.front_end->reset_done(); });
      },
  };
}

}  // namespace

io_actor spawn_io(caf::actor_system& sys, FrontEnd* front_end, WiringPtr wiring, Tracer* tracer) {
  return sys.spawn<caf::detached>(io_fn, front_end, std::move(wiring), tracer);
}

}  // namespace infer::actors
