// What the actor pipeline tells its front end (REPL, pipe, --serve) and its tests: generated
// tokens with their gate decision, turn ends, quiet spans, stats. Plain structs, no CAF, so front
// ends and protocol encoders include this without the actor system (actors/messages.h registers
// them with CAF).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace infer::actors {

// The gate's verdict for one step (DESIGN.md §3).
enum class Decision : uint8_t {
  kSpeak,   // keep generating
  kListen,  // stop generating and wait for input
  kAct,     // stop and call a tool (no tools yet: never chosen unless act ids are configured)
};
const char* decision_name(Decision d);

// What the end ids do in a turn.
enum class EndIds : uint8_t {
  kStopBefore,  // sampling one ends the turn; it is not emitted and not in the context (REPL)
  kStopAfter,   // sampling one ends the turn after emitting it; it stays in the context (--serve)
  kIgnore,      // ordinary tokens (--serve without STOP_AT_EOT, --bench-actors)
};

// Why a turn's generation ended.
enum class StopReason : uint8_t {
  kEndToken,     // the model sampled an end-of-turn id (EndIds::kStopBefore: not emitted, not in
                 // the context; kStopAfter: emitted and kept)
  kStopId,       // the turn emitted one of its stop ids (kept in the context)
  kSink,         // the token sink ended the turn (Verdict::kLast or kRefuse)
  kTokenLimit,   // max_tokens generated
  kInterrupted,  // Pipeline::interrupt() (Ctrl-C, a serve interrupt frame)
  kGate,         // the gate chose listen or act
  kContextFull,  // the stream reached max_positions
  kError,        // the forward pass failed (the error follows as an ErrorEvent)
  kNoGenerate,   // input was only appended (generate = false)
};
const char* stop_reason_name(StopReason r);

// Where a token of a turn comes from.
enum class TokenOrigin : uint8_t { kSampled, kToolResponse, kInterrupt };

// One generated token on its way out: the stream fills id and signals, the gate its decision,
// the tokenizer the text. step counts the tokens of the turn from 0.
struct TokenEvent {
  uint64_t turn = 0;
  int64_t step = 0;
  int64_t position = 0;  // where the token sits in the context (it is fed at this position)
  int32_t id = 0;
  float entropy = 0.0f;   // nats, of the distribution the token was drawn from
  float top_prob = 0.0f;  // probability of its most likely token
  float eot_prob = 0.0f;  // probability of the end-of-turn ids together
  float ms_per_token = 0.0f;  // the stream's recent decode cost
  int64_t tokens_left = 0;    // of the turn's limit, after this one
  Decision decision = Decision::kSpeak;
  std::string text;        // the text this token completes (may be empty: a partial character)
  int64_t emit_ns = 0;     // steady clock when the stream sent it (hop latency, traces)
  // Part of a tool call the engine runs (<|tool_call> ... <tool_call|>): in the context, never
  // shown as text (text stays empty); the call itself comes as a ToolEvent.
  bool tool_call = false;
  // kSampled, or written into the turn by the engine: a tool's response after its call, an
  // acked interrupt injected at a token boundary (docs/PROTOCOL.md §4.29: --serve sends these
  // as TOKENs so that a client can rebuild the context). Those have no gate decision and are
  // not counted as generated; their `step` is the number of tokens sampled before them.
  TokenOrigin origin = TokenOrigin::kSampled;
  bool inserted() const { return origin != TokenOrigin::kSampled; }
};

// A turn's input is in the context (before its prefill): the stream now holds `position` ids,
// `n` of them this turn's.
struct InputAppended {
  uint64_t turn = 0;
  int64_t position = 0;
  int64_t n = 0;
};

// The end of one turn: generation stopped (or there was none), everything before it delivered.
struct TurnEnd {
  uint64_t turn = 0;
  StopReason reason = StopReason::kNoGenerate;
  int32_t stop_id = -1;     // the end id sampled (kEndToken), else -1
  int64_t generated = 0;    // tokens emitted in this turn
  int64_t prefilled = 0;    // input tokens fed in this turn
  int64_t position = 0;     // context length after the turn (fed and pending)
  double prefill_ms = 0.0;
  double decode_ms = 0.0;
  std::string tail_text;    // text the detokenizer still held (an incomplete character)
};

// consolidation: no input for the debounce time; [from, to) are the positions since the last one.
struct QuietSpan {
  int64_t from = 0;
  int64_t to = 0;
};

// /stats: filled by the stream, the gate adds its counts.
struct PipelineStats {
  int64_t position = 0;  // context length (fed and pending)
  int64_t fed = 0;       // positions the forward pass has computed
  uint64_t turns = 0;
  int64_t generated = 0;  // tokens over the session (since /reset)
  int64_t prefilled = 0;
  int64_t decoded = 0;  // single-token forward calls (a generated token fed back)
  double decode_ms = 0.0;
  double prefill_ms = 0.0;
  int64_t max_positions = 0;
  int64_t speak = 0, listen = 0, act = 0;  // gate decisions
  std::vector<int32_t> context;  // the context's ids, only when asked for (tests, debugging)
};

// Episodic memory on request (--serve's memory frames, the REPL's /remember, /forget, /memory),
// run by the stream between turns, in order with the input; answered by a MemoryReply with the
// same ticket (the caller's numbering).
enum class MemoryOpKind : uint8_t {
  kRecall,  // text/ids join the conversation; recall from their rows into the recall tier now
  kStore,   // episodes now of the window's tokens not yet stored
  kForget,  // episode_id
  kQuery,   // the store's episodes [first, first + max_count) by id, and the last recall's hits
  kDrain,   // commit what is being written (shutdown)
};
struct MemoryOp {
  uint64_t ticket = 0;
  MemoryOpKind kind = MemoryOpKind::kQuery;
  std::string text;          // kRecall (the tokenizer turns it into ids)
  std::vector<int32_t> ids;  // kRecall
  uint64_t episode_id = 0;   // kForget
  uint32_t first = 0, max_count = 0;  // kQuery
  std::string refused;       // set on the way: the stream answers this error instead
};

// One episode as a memory answer or event describes it.
struct MemoryEntry {
  uint64_t id = 0;
  int64_t pos0 = 0;
  uint32_t n_tokens = 0;
  float strength = 0.0f;  // decayed to now (query), after the operation (recall, events)
  double score = 0.0;     // recall: the dual score
  float association = 0.0f;
  int64_t written_ms = 0, recalled_ms = 0;
  std::string preview;    // query only
};

struct MemoryReply {
  uint64_t ticket = 0;
  MemoryOpKind kind = MemoryOpKind::kQuery;
  bool ok = true;
  ErrorCode code = ErrorCode::kInternal;  // when !ok
  std::string error;                      // when !ok
  std::vector<MemoryEntry> entries;  // recalled (best first), stored, forgotten, or listed
  uint64_t total = 0, capacity = 0;  // query: episodes in the store, and room
  std::string path;                  // query: the store's file
  std::vector<MemoryEntry> last_hits;  // query: the latest recall, best first
  int64_t position = -1;  // recall: the context length after its query joined
  int64_t prefilled = 0;  // recall, store: the tokens it read (STATS counts them)
  double prefill_ms = 0.0;
  int64_t now_ms = 0;     // when it was answered (ages)
};

enum class MemoryEventKind : uint8_t { kStored = 1, kRecalled, kForgotten, kReplaced };
// Something happened to an episode; caused by the MemoryOp cause_ticket, by the generating turn
// cause_turn (its automatic recall), or by background consolidation (both 0).
struct MemoryNotice {
  MemoryEventKind kind = MemoryEventKind::kStored;
  MemoryEntry entry;
  uint64_t cause_ticket = 0;
  uint64_t cause_turn = 0;
};

// A tool call the model wrote (docs/TOOLS.md, Running calls), as the front end sees it.
enum class ToolEventKind : uint8_t {
  kCall,        // a call is about to run (name, arguments)
  kResult,      // it ran: result, result_bytes, ms
  kError,       // it could not run or failed (malformed, truncated, unknown tool, over
                // --tool-steps, a tool's own error): message, and the error response's JSON
  kNotRun,      // tools are off (no --tools): the call is reported, not run, nothing injected
  kClientCall,  // a call for a tool the front end declared: answer Pipeline::tool_result(call_id)
};
const char* tool_event_kind_name(ToolEventKind k);

struct ToolEvent {
  ToolEventKind kind = ToolEventKind::kCall;
  uint64_t turn = 0;
  uint64_t call_id = 0;   // numbers the pipeline's calls from 1
  std::string name;       // "" when a malformed call's name could not be read
  std::string arguments;  // the call's arguments as JSON text (a malformed call: its raw text)
  std::string result;     // kResult, kError: the response written back, as JSON text
  int64_t result_bytes = 0;  // of the response's JSON text
  double ms = 0.0;           // how long the tool took (kResult, kError)
  std::string message;       // kError, kNotRun: why
};

struct ErrorEvent {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
};

}  // namespace infer::actors
