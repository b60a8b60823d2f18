// stream: owns the Engine (Forward, sampler, context) on a detached thread. One input message
// runs a whole turn through Engine::run_turn (which checks the interrupt epoch, the gate's stop
// and the gate's lead between tokens); one message out per token, none per layer (DESIGN.md §3).
// With a tokenizer that has the tool markers, the turn runs through the ToolLoop: a call the
// model writes goes to the tools actor and its response joins the same turn.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "actors/stages.h"

namespace infer::actors {
namespace {

struct StreamState {
  std::shared_ptr<Engine> engine;
  std::shared_ptr<Control> control;
  WiringPtr wiring;
  Tracer* tracer = nullptr;
  std::shared_ptr<MemoryLink> link;  // null: no episodic memory
  std::optional<ToolLoop> tool_loop;  // null: no tool markers in the tokenizer
  uint64_t turns = 0;
  int64_t generated = 0;  // since the last reset
};

using Self = stream_actor::stateful_pointer<StreamState>;

// A tool call's answer can take as long as its tool allows (a command's timeout, a client's);
// past this the call gets an error rather than hold the turn for ever.
constexpr auto kToolWait = std::chrono::minutes(10);
constexpr auto kToolPoll = std::chrono::milliseconds(20);

// Each token goes to the gate as it is sampled; tool events follow the same path (in order with
// the tokens), and a call is run by the tools actor while this thread waits.
class GateSink : public ToolTurnSink {
 public:
  GateSink(Self self, const StreamInput& in) : self_(self), in_(in) {}
  Verdict token(const Step& s, bool in_call) override {
    TokenEvent t;
    t.turn = in_.turn;
    t.step = s.index;
    t.position = s.position;
    t.id = s.id;
    t.entropy = s.entropy;
    t.top_prob = s.top_prob;
    t.eot_prob = s.eot_prob;
    t.ms_per_token = s.ms_per_token;
    t.tokens_left = in_.max_tokens - s.index - 1;
    t.emit_ns = steady_ns();
    t.tool_call = in_call;
    generated_before_ = s.index + 1;
    self_->send(self_->state.wiring->gate, std::move(t));
    return Verdict::kKeep;
  }
  void appended(int64_t position, int64_t n) override {
    self_->send(self_->state.wiring->gate, InputAppended{in_.turn, position, n});
  }
  // Each id the engine wrote without sampling goes out as a token marked inserted, so that a
  // front end sees the whole context (the gate passes it on without a decision).
  void inserted(int64_t position, int64_t n, TokenOrigin origin) override {
    const std::vector<int32_t>& context = self_->state.engine->context();
    for (int64_t pos = position - n; pos < position; ++pos) {
      TokenEvent t;
      t.turn = in_.turn;
      t.step = generated_before_;
      t.position = pos;
      t.id = context[size_t(pos)];
      t.emit_ns = steady_ns();
      t.origin = origin;
      self_->send(self_->state.wiring->gate, std::move(t));
    }
  }
  void event(const ToolEvent& e) override { self_->send(self_->state.wiring->gate, e); }
  // Waits for the tools actor's answer, looking at the interrupt every kToolPoll: Ctrl-C during
  // a long command ends the wait (the call gets an error response; the command runs on to its
  // own timeout in the tools actor).
  ToolAnswer run(uint64_t call_id, const std::string& name,
                 const nlohmann::json& arguments) override {
    StreamState& st = self_->state;
    TraceScope scope(st.tracer, "stream", "tool wait", int64_t(call_id));
    ToolAnswer a;
    const auto fail = [&](std::string why) {
      a.error = true;
      a.result = {{"error", std::move(why)}};
    };
    caf::scoped_actor waiter{self_->system()};
    // A plain send: the tools actor's answer comes back as an ordinary message.
    waiter->send(st.wiring->tools, ToolRequest{call_id, in_.turn, name, tool_json_text(arguments)});
    const auto deadline = std::chrono::steady_clock::now() + kToolWait;
    bool waiting = true;
    waiter->receive_while(waiting)(
        [&](ToolReply& r) {
          if (r.call_id != call_id) return;
          a.result = nlohmann::json::parse(r.result, nullptr, false);
          a.error = r.error;
          a.ms = r.ms;
          if (a.result.is_discarded()) fail("the tool's answer is not JSON");
          waiting = false;
        },
        [&](caf::error& e) {
          fail("the tool did not answer: " + error_event(e).message);
          waiting = false;
        },
        caf::after(kToolPoll) >> [&] {
          const Control& c = *st.control;
          if (c.interrupt_epoch.load() != in_.epoch || c.shutting_down.load()) {
            fail("interrupted while the tool ran");
            waiting = false;
          } else if (std::chrono::steady_clock::now() > deadline) {
            fail("the tool did not answer within 10 minutes");
            waiting = false;
          }
        });
    return a;
  }

 private:
  Self self_;
  const StreamInput& in_;
  int64_t generated_before_ = 0;  // tokens of the turn sampled so far
};

// Without the call loop: every token as it is.
class PlainSink : public TokenSink {
 public:
  explicit PlainSink(GateSink& out) : out_(out) {}
  Verdict token(const Step& s) override { return out_.token(s, false); }
  void appended(int64_t position, int64_t n) override { out_.appended(position, n); }
  void injected(int64_t position, int64_t n) override {
    out_.inserted(position, n, TokenOrigin::kInterrupt);
  }

 private:
  GateSink& out_;
};

void run_turn(Self self, const StreamInput& in) {
  StreamState& s = self->state;
  TraceScope scope(s.tracer, "stream", "turn", int64_t(in.turn));
  ++s.turns;
  SamplingParams own;
  own.temperature = in.sampling.temperature;
  own.top_k = in.sampling.top_k;
  own.top_p = in.sampling.top_p;
  own.seed = in.sampling.seed;
  TurnRequest req;
  req.input = in.ids;
  req.max_tokens = in.generate ? in.max_tokens : 0;
  req.end_ids = in.sampling.end_ids;
  req.stop_ids = in.sampling.stop_ids;
  req.sampling = in.sampling.own ? &own : nullptr;
  req.control = TurnControl{s.control.get(), in.epoch, in.turn, in.sampling.gate_may_stop};
  GateSink sink(self, in);
  if (s.link) s.link->running_turn.store(in.turn);  // the automatic recall's cause
  PlainSink plain(sink);
  const TurnOutcome o = s.tool_loop ? s.tool_loop->run_turn(*s.engine, req, in.turn, sink)
                                    : s.engine->run_turn(req, plain);
  if (s.link) s.link->running_turn.store(0);
  if (o.error) self->send(s.wiring->gate, failure(*o.error));
  s.generated += o.generated;
  TurnEnd end;
  end.turn = in.turn;
  end.reason = in.generate && o.reason == StopReason::kNoGenerate ? StopReason::kTokenLimit
                                                                  : o.reason;
  end.stop_id = o.stop_id;
  end.generated = o.generated;
  end.prefilled = o.prefilled;
  end.position = s.engine->position();
  end.prefill_ms = o.prefill_ms;
  end.decode_ms = o.decode_ms;
  self->send(s.wiring->consolidation, end);
  self->send(s.wiring->gate, std::move(end));
}

// With episodic memory: the ring's evicted rows go to consolidation through the link's buffer,
// an episode's worth at a time; the decode thread only copies rows and queues a block.
void attach_memory(Self self) {
  StreamState& s = self->state;
  KvRingAccess* ring = s.engine->forward().kv_ring();
  if (!s.link || ring == nullptr) return;
  MemoryLink* link = s.link.get();
  const WiringPtr wiring = s.wiring;
  // Four blocks: consolidation may fall four episodes behind before evicted tokens are dropped.
  link->buffer = std::make_shared<memory::EvictionBuffer>(
      link->episode_tokens, 4, [link, wiring](std::unique_ptr<KvBlock> b) {
        link->push(EpisodeRows{std::move(b), false, true});
        caf::anon_send(wiring->consolidation, DrainMemory{});
      });
  ring->set_eviction_sink(link->buffer.get());
}

// The quiet conversation becomes episodes: the positions of the span still in the ring, after
// the evicted rows still waiting in the buffer (so positions reach consolidation in order).
void store_span(Self self, const StoreSpan& span) {
  StreamState& s = self->state;
  KvRingAccess* ring = s.engine->forward().kv_ring();
  if (!s.link || ring == nullptr) return;
  TraceScope scope(s.tracer, "stream", "memory quiet span", span.to - span.from);
  s.link->buffer->flush();
  const int64_t end = std::min(span.to, s.engine->fed());
  int64_t begin = span.from;
  while (begin < end && ring->ring().find(begin) < 0) ++begin;
  if (begin >= end) return;
  auto rows = std::make_unique<KvBlock>();
  if (!ring->read_kv(begin, end - begin, rows.get()).ok()) return;
  s.link->push(EpisodeRows{std::move(rows), true, false});
  self->send(s.wiring->consolidation, DrainMemory{});
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
                                      Tracer* tracer, std::shared_ptr<MemoryLink> link,
                                      std::optional<ToolLoopOptions> tool_loop) {
  self->state.link = std::move(link);
  if (tool_loop) self->state.tool_loop.emplace(std::move(*tool_loop));
  self->state.engine = std::move(engine);
  self->state.control = std::move(control);
  self->state.wiring = std::move(wiring);
  self->state.tracer = tracer;
  attach_memory(self);
  return {
      [=](const StreamInput& in) { run_turn(self, in); },
      [=](const StoreSpan& span) { store_span(self, span); },
      [=](const MemoryOp& op) {
        StreamState& s = self->state;
        return run_memory_op(s.link.get(), *s.engine, op, s.tracer);
      },
      [=](stats_atom, bool with_context) {  // the gate adds its counts and answers
        return self->delegate(self->state.wiring->gate, stats(self->state, with_context));
      },
      [=](SetPreamble& p) { self->state.engine->set_preamble(std::move(p.ids)); },
      [=](reset_atom a) {
        StreamState& s = self->state;
        TraceScope scope(s.tracer, "stream", "reset");
        if (s.link && s.link->buffer) s.link->buffer->flush();  // the old stream's last rows
        s.engine->reset();
        if (s.link) self->send(s.wiring->consolidation, StreamRestart{});
        s.turns = 0;
        s.generated = 0;
        self->send(s.wiring->consolidation, ResetDone{});
        return self->delegate(s.wiring->gate, a);
      },
  };
}

}  // namespace

stream_actor spawn_stream(caf::actor_system& sys, std::shared_ptr<Engine> engine,
                          std::shared_ptr<Control> control, WiringPtr wiring, Tracer* tracer,
                          std::shared_ptr<MemoryLink> link,
                          std::optional<ToolLoopOptions> tool_loop) {
  return sys.spawn<caf::detached>(stream_fn, std::move(engine), std::move(control),
                                  std::move(wiring), tracer, std::move(link),
                                  std::move(tool_loop));
}

}  // namespace infer::actors
