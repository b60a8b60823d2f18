// Pipeline: builds the CAF 0.17 actor system with the infer_actors type-ID block, spawns the
// stages, wires them, and shuts them down in order (stop generating, then exit everyone).
#include "actors/pipeline.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <limits>
#include <utility>

#include "actors/stages.h"

namespace infer::actors {
namespace {

caf::actor_system_config make_config(int threads) {
  caf::actor_system_config cfg;
  cfg.add_message_types<caf::id_block::infer_actors>();
  // The stream and io have threads of their own; gate, tokenizer and consolidation do little.
  cfg.set("scheduler.max-threads", size_t(threads > 0 ? threads : 2));
  // Work sharing: one queue and a condition variable, so an idle worker wakes at once for the
  // next token. Work stealing polls and then naps (50 us, then 10 ms sleeps): its median
  // stream -> io latency measured 66-80 us against 12-15 us here (infer --bench-actors, e2b-mini).
  cfg.set("scheduler.policy", caf::atom("sharing"));
  return cfg;
}

}  // namespace

struct Pipeline::Impl {
  explicit Impl(int threads) : cfg(make_config(threads)), sys(cfg) {}

  caf::actor_system_config cfg;
  caf::actor_system sys;
  std::shared_ptr<Control> control = std::make_shared<Control>();
  std::shared_ptr<Wiring> wiring = std::make_shared<Wiring>();
  std::shared_ptr<MemoryLink> memory;
  std::shared_ptr<ToolRegistry> tools;
  std::shared_ptr<Forward> forward;
  std::atomic<uint64_t> turns{0};
};

Pipeline::Pipeline(std::shared_ptr<Forward> forward, PipelineOptions opts, FrontEnd& front_end)
    : impl_(std::make_unique<Impl>(opts.scheduler_threads)) {
  Impl& m = *impl_;
  opts.engine.tracer = opts.tracer;
  m.memory = opts.memory;
  m.forward = forward;
  if (m.memory) {
    opts.engine.before_generate = [link = m.memory.get(), wiring = m.wiring.get(),
                                   fwd = forward.get(), tracer = opts.tracer](int64_t pos,
                                                                              int64_t n) {
      recall_for_turn(*link, *wiring, *fwd, tracer, pos, n);
    };
  }
  m.tools = std::make_shared<ToolRegistry>(opts.tools.builtin != nullptr);
  // The call loop runs wherever the tokenizer has the tool markers: with tools off it still
  // reports the calls the model writes.
  std::optional<ToolLoopOptions> loop;
  if (opts.tokenizer != nullptr) {
    if (Result<ToolTokens> tokens = ToolTokens::from(*opts.tokenizer); tokens.ok()) {
      loop = ToolLoopOptions{opts.tokenizer, *tokens, opts.tools.max_steps,
                             opts.tools.builtin != nullptr};
    }
  }
  auto engine = std::make_shared<Engine>(std::move(forward), std::move(opts.engine));
  const auto debounce = std::chrono::milliseconds(int64_t(opts.consolidate_after_s * 1000.0));
  Wiring& w = *m.wiring;
  w.io = spawn_io(m.sys, &front_end, m.wiring, opts.tracer);
  w.tokenizer = spawn_tokenizer(m.sys, opts.tokenizer, m.wiring, opts.tracer);
  w.stream = spawn_stream(m.sys, std::move(engine), m.control, m.wiring, opts.tracer, m.memory,
                          std::move(loop));
  w.tools = spawn_tools(m.sys, opts.tools, m.tools, m.wiring, opts.tracer);
  w.gate = spawn_gate(m.sys, Gate(std::move(opts.gate)), m.control, m.wiring, opts.tracer);
  w.consolidation = spawn_consolidation(m.sys, debounce, m.wiring, opts.tracer, m.memory);
  if (m.memory) {
    w.recall = spawn_recall(m.sys, m.memory, opts.tracer);
    // Under the link's mutex, on whichever thread changed the store: one message to io.
    m.memory->memory->set_event_hook([link = m.memory.get(), io = w.io](
                                         const memory::MemoryEvent& e) {
      MemoryNotice n;
      n.kind = MemoryEventKind(e.kind);
      n.entry.id = e.id;
      n.entry.pos0 = e.pos0;
      n.entry.n_tokens = e.n_tokens;
      n.entry.score = e.score;
      n.entry.association = e.association;
      n.entry.strength = e.strength;
      n.cause_ticket = link->cause_ticket;
      n.cause_turn = link->cause_turn;
      caf::anon_send(io, std::move(n));
    });
  }
}

Pipeline::~Pipeline() {
  Impl& m = *impl_;
  Control& c = *m.control;
  c.shutting_down.store(true);
  c.interrupt_epoch.fetch_add(1);
  c.gate_seen.store(std::numeric_limits<int64_t>::max() / 2);
  c.gate_seen.notify_all();
  const Wiring& w = *m.wiring;
  for (const caf::actor_addr& a : {w.io.address(), w.tokenizer.address(), w.stream.address(),
                                   w.gate.address(), w.consolidation.address(),
                                   w.recall.address(), w.tools.address()}) {
    if (a) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }
  m.sys.await_all_actors_done();
  // Nothing handed over is lost: the last evicted rows and what consolidation had not taken.
  if (m.memory) {
    if (m.memory->buffer) m.memory->buffer->flush();
    m.memory->drain();
    if (m.memory->buffer && m.memory->buffer->dropped() > 0) {
      std::fprintf(stderr,
                   "infer: memory: %lld evicted tokens were not stored (consolidation fell "
                   "behind by more than its buffer holds)\n",
                   (long long)m.memory->buffer->dropped());
    }
    // The buffer hands blocks to this pipeline's consolidation, which is gone: a later pipeline
    // on the same forward attaches its own (or none).
    if (KvRingAccess* ring = m.forward->kv_ring()) ring->set_eviction_sink(nullptr);
    std::lock_guard lock(m.memory->mu);
    m.memory->memory->set_event_hook({});  // the link outlives this pipeline
  }
  // The actors' states held the wiring; the handles in it go last.
  *m.wiring = Wiring{};
}

uint64_t Pipeline::send(std::string text, std::vector<int32_t> ids, bool generate,
                        int64_t max_tokens, TurnOptions turn) {
  Impl& m = *impl_;
  const uint64_t n = m.turns.fetch_add(1) + 1;
  InputMsg in{n, std::move(text), std::move(ids), generate, max_tokens,
              m.control->interrupt_epoch.load()};
  if (turn.sampling != nullptr) {
    in.sampling.own = true;
    in.sampling.temperature = turn.sampling->temperature;
    in.sampling.top_k = int32_t(turn.sampling->top_k);
    in.sampling.top_p = turn.sampling->top_p;
    in.sampling.seed = turn.sampling->seed;
  }
  in.sampling.end_ids = turn.end_ids;
  in.sampling.gate_may_stop = turn.gate_may_stop;
  in.sampling.stop_ids = std::move(turn.stop_ids);
  caf::anon_send(m.wiring->io, std::move(in));
  return n;
}

void Pipeline::memory(MemoryOp op) { caf::anon_send(impl_->wiring->io, std::move(op)); }

void Pipeline::interrupt() { impl_->control->interrupt_epoch.fetch_add(1); }

void Pipeline::reset(std::optional<std::vector<int32_t>> preamble) {
  // Both go to io, so the engine takes the preamble before this reset (CAF keeps the order of
  // one sender's messages to one receiver, and every stage passes them on in turn).
  if (preamble) caf::anon_send(impl_->wiring->io, SetPreamble{std::move(*preamble)});
  caf::anon_send(impl_->wiring->io, reset_atom::value);
}

Result<PipelineStats> Pipeline::stats(bool with_context) {
  caf::scoped_actor self{impl_->sys};
  Result<PipelineStats> out = make_error(ErrorCode::kInternal, "no stats");
  self->request(impl_->wiring->io, caf::infinite, stats_atom::value, with_context)
      .receive([&](PipelineStats& st) { out = std::move(st); },
               [&](caf::error& e) {
                 const ErrorEvent ev = error_event(e);
                 out = make_error(ev.code, ev.message);
               });
  return out;
}

Result<void> Pipeline::declare_client_tool(ToolDeclaration tool) {
  return impl_->tools->declare(std::move(tool));
}

Result<void> Pipeline::set_client_tools(std::vector<ToolDeclaration> tools) {
  return impl_->tools->replace_client(std::move(tools));
}

void Pipeline::tool_result(uint64_t call_id, std::string result_json) {
  caf::anon_send(impl_->wiring->tools, ClientToolResult{call_id, std::move(result_json)});
}

std::vector<ToolDeclaration> Pipeline::tool_declarations() const { return impl_->tools->all(); }

bool Pipeline::tools_enabled() const { return impl_->tools->enabled(); }

ErrorEvent error_event(const caf::error& e) {
  if (!e) return ErrorEvent{ErrorCode::kInternal, "an empty error"};
  if (e.category() == caf::atom("infer") && e.context().match_elements<std::string>()) {
    return ErrorEvent{ErrorCode(e.code()), e.context().get_as<std::string>(0)};
  }
  return ErrorEvent{ErrorCode::kInternal, caf::to_string(e)};
}

}  // namespace infer::actors
