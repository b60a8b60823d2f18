// stream: owns the Engine (Forward, sampler, context) on a detached thread. One input message
// runs a whole turn: append, prefill, then one step per token, checking between steps the
// interrupt epoch, the gate's stop and the gate's lead; one message out per token, none per
// layer (DESIGN.md §3).
#include <utility>

#include "actors/stages.h"

namespace infer::actors {
namespace {

struct StreamState {
  std::shared_ptr<Engine> engine;
  std::shared_ptr<Control> control;
  WiringPtr wiring;
  Tracer* tracer = nullptr;
  uint64_t turns = 0;
  int64_t generated = 0;  // since the last reset
  int64_t sent = 0;       // tokens sent to the gate over the session (Control::gate_seen)
};

using Self = stream_actor::stateful_pointer<StreamState>;

// Waits until the gate is fewer than kGateLead tokens behind.
void wait_for_gate(StreamState& s) {
  Control& c = *s.control;
  for (int64_t seen = c.gate_seen.load(); s.sent - seen >= kGateLead; seen = c.gate_seen.load()) {
    if (c.shutting_down.load()) return;
    c.gate_seen.wait(seen);
  }
}

void run_turn(Self self, const StreamInput& in) {
  StreamState& s = self->state;
  Engine& engine = *s.engine;
  Control& c = *s.control;
  TraceScope scope(s.tracer, "stream", "turn", int64_t(in.turn));
  const auto interrupted = [&] {
    return c.interrupt_epoch.load(std::memory_order_relaxed) != in.epoch ||
           c.shutting_down.load(std::memory_order_relaxed);
  };
  ++s.turns;
  TurnEnd end;
  end.turn = in.turn;
  const double prefill_ms0 = engine.prefill_ms(), decode_ms0 = engine.decode_ms();
  const int64_t prefilled0 = engine.prefilled();
  const auto fail = [&](const Error& e) {
    self->send(s.wiring->gate, ErrorEvent{e.code, e.message});
    end.reason = StopReason::kError;
  };

  if (Result<void> r = engine.append(in.ids); !r) {
    fail(r.error());
  } else if (Result<bool> fed = [&] {
               TraceScope prefill(s.tracer, "stream", "prefill", engine.position() - engine.fed());
               return engine.feed(interrupted);
             }();
             !fed) {
    fail(fed.error());
  } else if (!*fed) {
    end.reason = StopReason::kInterrupted;
  } else if (in.generate) {
    end.reason = StopReason::kTokenLimit;
    engine.set_stop_at_end(in.sampling.stop_at_end);
    if (in.sampling.own) {
      SamplingParams p;
      p.temperature = in.sampling.temperature;
      p.top_k = in.sampling.top_k;
      p.top_p = in.sampling.top_p;
      p.seed = in.sampling.seed;
      engine.set_request_sampling(&p);
    }
    for (int64_t step = 0; step < in.max_tokens; ++step) {
      wait_for_gate(s);
      if (interrupted()) {
        end.reason = StopReason::kInterrupted;
        break;
      }
      if (in.sampling.gate_may_stop &&
          c.gate_stop_turn.load(std::memory_order_relaxed) == in.turn) {
        end.reason = StopReason::kGate;
        break;
      }
      if (engine.full()) {
        end.reason = StopReason::kContextFull;
        break;
      }
      TraceScope token(s.tracer, "stream", "token", step);
      Result<Step> r = engine.step();
      if (!r) {
        fail(r.error());
        break;
      }
      if (r->end) {
        end.reason = StopReason::kEndToken;
        end.stop_id = r->id;
        break;
      }
      TokenEvent t;
      t.turn = in.turn;
      t.step = step;
      t.position = r->position;
      t.id = r->id;
      t.entropy = r->entropy;
      t.top_prob = r->top_prob;
      t.eot_prob = r->eot_prob;
      t.ms_per_token = engine.ms_per_token();
      t.tokens_left = in.max_tokens - step - 1;
      t.emit_ns = steady_ns();
      self->send(s.wiring->gate, std::move(t));
      ++s.sent;
      ++end.generated;
    }
  }
  engine.set_request_sampling(nullptr);  // the next turn samples with the session's settings
  engine.set_stop_at_end(true);
  s.generated += end.generated;
  end.prefilled = engine.prefilled() - prefilled0;
  end.position = engine.position();
  end.prefill_ms = engine.prefill_ms() - prefill_ms0;
  end.decode_ms = engine.decode_ms() - decode_ms0;
  self->send(s.wiring->consolidation, end);
  self->send(s.wiring->gate, std::move(end));
}

PipelineStats stats(const StreamState& s, bool with_context) {
  const Engine& e = *s.engine;
  PipelineStats st;
  st.position = e.position();
  st.fed = e.fed();
  st.turns = s.turns;
  st.generated = s.generated;
  st.prefilled = e.prefilled();
  st.decoded = e.decoded();
  st.decode_ms = e.decode_ms();
  st.prefill_ms = e.prefill_ms();
  st.max_positions = e.options().max_positions;
  if (with_context) st.context = e.context();
  return st;
}

stream_actor::behavior_type stream_fn(Self self, std::shared_ptr<Engine> engine,
                                      std::shared_ptr<Control> control, WiringPtr wiring,
                                      Tracer* tracer) {
  self->state.engine = std::move(engine);
  self->state.control = std::move(control);
  self->state.wiring = std::move(wiring);
  self->state.tracer = tracer;
  return {
      [=](const StreamInput& in) { run_turn(self, in); },
      [=](const Command& cmd) {
        StreamState& s = self->state;
        TraceScope scope(s.tracer, "stream", "command", int64_t(cmd.kind));
        if (cmd.kind == CommandKind::kReset) {
          s.engine->reset();
          s.turns = 0;
          s.generated = 0;
          self->send(s.wiring->consolidation, ResetDone{});
          self->send(s.wiring->gate, ResetDone{});
        } else {
          self->send(s.wiring->gate, stats(s, cmd.with_context));
        }
      },
  };
}

}  // namespace

stream_actor spawn_stream(caf::actor_system& sys, std::shared_ptr<Engine> engine,
                          std::shared_ptr<Control> control, WiringPtr wiring, Tracer* tracer) {
  return sys.spawn<caf::detached>(stream_fn, std::move(engine), std::move(control),
                                  std::move(wiring), tracer);
}

}  // namespace infer::actors
