// The actor pipeline's messages and interfaces (DESIGN.md §3): every type registered once in
// the `infer_actors` type-ID block (CAF 0.17.6), each with an inspect, and one typed_actor alias
// per stage. Events seen by front ends are in actors/events.h; the ones here stay inside.
#pragma once

#include <caf/all.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/events.h"
#include "actors/memory_link.h"

namespace infer::actors {

// A generation's settings (Pipeline::send's TurnOptions): its own sampling (own), else the
// session's; what end ids and stop ids do. Plain fields: CAF inspects them like the rest.
struct TurnSampling {
  EndIds end_ids = EndIds::kStopBefore;  // what the model's end ids do in this turn
  bool own = false;
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
  // false: the gate's listen/act decisions are reported, not obeyed (--serve without GATED).
  bool gate_may_stop = true;
  std::vector<int32_t> stop_ids;  // emitting one ends the turn (--serve GENERATE stop ids)
};

// io -> tokenizer: text (encoded, then) and ids appended to the context; with generate, a turn
// of at most max_tokens follows. turn numbers the inputs from 1; epoch is the interrupt epoch
// when it was sent (actors/control.h).
struct InputMsg {
  uint64_t turn = 0;
  std::string text;
  std::vector<int32_t> ids;
  bool generate = true;
  int64_t max_tokens = 0;
  uint64_t epoch = 0;
  TurnSampling sampling;
};

// tokenizer -> stream: the same input as ids.
struct StreamInput {
  uint64_t turn = 0;
  std::vector<int32_t> ids;
  bool generate = true;
  int64_t max_tokens = 0;
  uint64_t epoch = 0;
  TurnSampling sampling;
};

// stream -> consolidation: the context is empty again; also the reset request's reply.
struct ResetDone {};

// io -> tokenizer -> stream: the ids every context opens with from the next reset on (--serve's
// system turn once a client declared its tools), along the path a reset takes so that it
// reaches the engine before the reset sent after it.
struct SetPreamble {
  std::vector<int32_t> ids;
};

// An error on its way to the front end (stream or tokenizer -> ... -> io), as a caf::error built
// from our ErrorCode (CAF_ERROR_CODE_ENUM below). A bare caf::error message would go to the
// actor's error handler, not its behavior, so it travels in this struct.
struct Failure {
  caf::error error;
};

// io -> gate and consolidation: input `turn` was sent (urgency; the debounce restarts).
struct InputQueued {
  uint64_t turn = 0;
};

// consolidation -> itself after the debounce time.
struct QuietTick {
  uint64_t generation = 0;
};

// stream -> tools: run one parsed call (arguments as JSON text); answered with a ToolReply.
struct ToolRequest {
  uint64_t call_id = 0;
  uint64_t turn = 0;
  std::string name;
  std::string arguments;
};
struct ToolReply {
  uint64_t call_id = 0;
  std::string result;  // JSON text of the response's value ({error: ...} when it failed)
  bool error = false;
  double ms = 0.0;
};
// Pipeline::tool_result -> tools: a client tool's answer (JSON text) to call_id.
struct ClientToolResult {
  uint64_t call_id = 0;
  std::string result;
};
// tools -> itself: client_timeout after a client call went out.
struct ClientToolTimeout {
  uint64_t call_id = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TurnSampling& x) {
  return f(caf::meta::type_name("TurnSampling"), x.end_ids, x.own, x.temperature, x.top_k,
           x.top_p, x.seed, x.gate_may_stop, x.stop_ids);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, InputMsg& x) {
  return f(caf::meta::type_name("InputMsg"), x.turn, x.text, x.ids, x.generate, x.max_tokens,
           x.epoch, x.sampling);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StreamInput& x) {
  return f(caf::meta::type_name("StreamInput"), x.turn, x.ids, x.generate, x.max_tokens,
           x.epoch, x.sampling);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ResetDone&) {
  return f(caf::meta::type_name("ResetDone"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SetPreamble& x) {
  return f(caf::meta::type_name("SetPreamble"), x.ids);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, InputQueued& x) {
  return f(caf::meta::type_name("InputQueued"), x.turn);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, QuietTick& x) {
  return f(caf::meta::type_name("QuietTick"), x.generation);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TokenEvent& x) {
  return f(caf::meta::type_name("TokenEvent"), x.turn, x.step, x.position, x.id, x.entropy,
           x.top_prob, x.eot_prob, x.ms_per_token, x.tokens_left, x.decision, x.text, x.emit_ns,
           x.tool_call, x.origin);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ToolEvent& x) {
  return f(caf::meta::type_name("ToolEvent"), x.kind, x.turn, x.call_id, x.name, x.arguments,
           x.result, x.result_bytes, x.ms, x.message);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ToolRequest& x) {
  return f(caf::meta::type_name("ToolRequest"), x.call_id, x.turn, x.name, x.arguments);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ToolReply& x) {
  return f(caf::meta::type_name("ToolReply"), x.call_id, x.result, x.error, x.ms);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ClientToolResult& x) {
  return f(caf::meta::type_name("ClientToolResult"), x.call_id, x.result);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ClientToolTimeout& x) {
  return f(caf::meta::type_name("ClientToolTimeout"), x.call_id);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, InputAppended& x) {
  return f(caf::meta::type_name("InputAppended"), x.turn, x.position, x.n);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TurnEnd& x) {
  return f(caf::meta::type_name("TurnEnd"), x.turn, x.reason, x.stop_id, x.generated, x.prefilled,
           x.position, x.prefill_ms, x.decode_ms, x.tail_text);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, QuietSpan& x) {
  return f(caf::meta::type_name("QuietSpan"), x.from, x.to);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, PipelineStats& x) {
  return f(caf::meta::type_name("PipelineStats"), x.position, x.fed, x.turns, x.generated,
           x.prefilled, x.decoded, x.decode_ms, x.prefill_ms, x.max_positions, x.speak, x.listen, x.act,
           x.context);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StoreSpan& x) {
  return f(caf::meta::type_name("StoreSpan"), x.from, x.to);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, DrainMemory&) {
  return f(caf::meta::type_name("DrainMemory"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StreamRestart&) {
  return f(caf::meta::type_name("StreamRestart"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, MemoryOp& x) {
  return f(caf::meta::type_name("MemoryOp"), x.ticket, x.kind, x.text, x.ids, x.episode_id,
           x.first, x.max_count, x.refused);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, MemoryEntry& x) {
  return f(caf::meta::type_name("MemoryEntry"), x.id, x.pos0, x.n_tokens, x.strength, x.score,
           x.association, x.written_ms, x.recalled_ms, x.preview);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, MemoryReply& x) {
  return f(caf::meta::type_name("MemoryReply"), x.ticket, x.kind, x.ok, x.code, x.error,
           x.entries, x.total, x.capacity, x.path, x.last_hits, x.position, x.prefilled,
           x.prefill_ms, x.now_ms);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, MemoryNotice& x) {
  return f(caf::meta::type_name("MemoryNotice"), x.kind, x.entry, x.cause_ticket, x.cause_turn);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Failure& x) {
  return f(caf::meta::type_name("Failure"), x.error);
}

}  // namespace infer::actors

CAF_BEGIN_TYPE_ID_BLOCK(infer_actors, caf::first_custom_type_id)
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::InputMsg))
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::StreamInput))
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::ResetDone))
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::InputQueued))
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::QuietTick))
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::TokenEvent))
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::TurnEnd))
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::QuietSpan))
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::PipelineStats))
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::Failure))
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::InputAppended))
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::DrainMemory))
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::StoreSpan))
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::RecallRequest))
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::StreamRestart))
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::MemoryOp))
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::MemoryReply))
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::MemoryNotice))
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::ToolEvent))
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::ToolRequest))
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::ToolReply))
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::ClientToolResult))
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::ClientToolTimeout))
  CAF_ADD_TYPE_ID(infer_actors, (infer::actors::SetPreamble))
  CAF_ADD_ATOM(infer_actors, infer::actors, stats_atom, "stats")
  CAF_ADD_ATOM(infer_actors, infer::actors, reset_atom, "reset")
CAF_END_TYPE_ID_BLOCK(infer_actors)

// Our ErrorCode as a CAF error category: caf::error(ErrorCode::kIo, message).
CAF_ERROR_CODE_ENUM(infer::ErrorCode, "infer")

namespace infer::actors {

// Stats and reset are requests with typed replies, each passed on by delegation along the
// path the input takes (so they follow the turns already sent), answered by the last stage.
using stream_actor =
    caf::typed_actor<caf::reacts_to<StreamInput>, caf::reacts_to<StoreSpan>,
                     caf::replies_to<MemoryOp>::with<MemoryReply>,
                     caf::replies_to<stats_atom, bool>::with<PipelineStats>,
                     caf::reacts_to<SetPreamble>,
                     caf::replies_to<reset_atom>::with<ResetDone>>;
using gate_actor =
    caf::typed_actor<caf::reacts_to<TokenEvent>, caf::reacts_to<TurnEnd>,
                     caf::reacts_to<ToolEvent>,
                     caf::reacts_to<InputAppended>,
                     caf::reacts_to<InputQueued>, caf::reacts_to<Failure>,
                     caf::replies_to<PipelineStats>::with<PipelineStats>,
                     caf::replies_to<reset_atom>::with<ResetDone>>;
using tokenizer_actor =
    caf::typed_actor<caf::reacts_to<InputMsg>, caf::reacts_to<TokenEvent>,
                     caf::reacts_to<ToolEvent>,
                     caf::reacts_to<TurnEnd>, caf::reacts_to<InputAppended>,
                     caf::reacts_to<Failure>,
                     caf::replies_to<MemoryOp>::with<MemoryReply>,
                     caf::replies_to<stats_atom, bool>::with<PipelineStats>,
                     caf::reacts_to<SetPreamble>,
                     caf::replies_to<reset_atom>::with<ResetDone>,
                     caf::replies_to<ResetDone>::with<ResetDone>>;
using io_actor =
    caf::typed_actor<caf::reacts_to<InputMsg>, caf::reacts_to<TokenEvent>,
                     caf::reacts_to<ToolEvent>,
                     caf::reacts_to<TurnEnd>, caf::reacts_to<InputAppended>,
                     caf::reacts_to<QuietSpan>, caf::reacts_to<Failure>,
                     caf::reacts_to<MemoryOp>, caf::reacts_to<MemoryNotice>,
                     caf::replies_to<stats_atom, bool>::with<PipelineStats>,
                     caf::reacts_to<SetPreamble>, caf::reacts_to<reset_atom>>;
using consolidation_actor =
    caf::typed_actor<caf::reacts_to<InputQueued>, caf::reacts_to<TurnEnd>,
                     caf::reacts_to<ResetDone>, caf::reacts_to<QuietTick>,
                     caf::reacts_to<DrainMemory>, caf::reacts_to<StreamRestart>>;
using recall_actor = caf::typed_actor<caf::reacts_to<RecallRequest>>;
// Tool calls go stream -> tools and back; their events go stream -> gate -> tokenizer -> io with
// the tokens (in order), a client call's request tools -> gate -> ... -> io after them.
using tools_actor =
    caf::typed_actor<caf::replies_to<ToolRequest>::with<ToolReply>,
                     caf::reacts_to<ClientToolResult>, caf::reacts_to<ClientToolTimeout>>;

// Errors cross actors as caf::error (STYLE.md, Errors); front ends get them back as ErrorEvent.
inline Failure failure(const Error& e) { return Failure{caf::error(e.code, e.message)}; }
ErrorEvent error_event(const caf::error& e);

// Who talks to whom, filled by Pipeline after spawning every stage and before the first
// message (sending a message orders the writes before the receiver's reads).
struct Wiring {
  io_actor io;
  tokenizer_actor tokenizer;
  stream_actor stream;
  gate_actor gate;
  consolidation_actor consolidation;
  recall_actor recall;  // null without episodic memory
  tools_actor tools;
};

}  // namespace infer::actors
