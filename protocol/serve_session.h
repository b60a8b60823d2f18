// ServeSession: the --serve session's state machine (PROTOCOL.md §6.3, §7, §8), pure: bytes
// from the client and events from the engine in; frames for the client and commands for the
// engine out. No I/O, no threads, no actors: cli/serve_front_end.cpp does the reading, writing
// and locking, and hands every call's Output on (frames to stdout, commands to the pipeline).
// - appends become input-only turns; each turn's end becomes its APPENDED;
// - a GENERATE is one generating turn: its tokens become TOKEN (and GATE) frames, its end DONE;
//   appends that arrive meanwhile wait here and are sent after DONE, in order;
// - after an INTERRUPT is read at most one more TOKEN goes out;
// - STATS while generating is answered at once; while idle it waits for the answers before it
//   (APPENDED, RESET_ACK), so answers keep the order of their requests;
// - RESET mid-generation interrupts, sends the queued appends, then resets; SHUTDOWN, EOF and a
//   closed output interrupt, drop the queued appends and end the session once every request
//   handed to the engine is answered;
// - memory frames (§4.14) become MemoryCommands answered by memory_reply(), queued like appends
//   while generating; with MEMORY_WATCH on, memory_event()s become MEMORY_EVENT frames carrying
//   the request id of the frame that caused them; SHUTDOWN waits for the episodes being written;
// - tool frames (§4.20-§4.29) go to a ToolFrames at once, also while generating, and are
//   answered in order; TOOL_CALLs carry their GENERATE's id; TOOL_EVENTs go out as the
//   client's TOOL_EVENTS mask says. Without a ToolFrames they are NOT_AVAILABLE.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "protocol/messages.h"
#include "protocol/server_reader.h"
#include "protocol/tool_frames.h"

namespace infer::protocol {

// ---- engine -> session

// One generated token, as the engine's sink sent it.
struct EngineToken {
  uint64_t turn = 0;
  uint32_t id = 0;
  uint64_t pos = 0;
  std::string text;
  GateDecision decision = GateDecision::kSpeak;
  float entropy = 0.0f, top_prob = 0.0f, eot_prob = 0.0f;
  float cost_ms = 0.0f;  // ms per token x tokens left
  // Written by the engine, not sampled (a tool's response, an injected interrupt, §4.29): a
  // TOKEN like the others, with no GATE after it.
  bool inserted = false;
  // Tool interrupts pending when the token was sampled (--tools): part of the GATE's urgency.
  uint32_t pending_interrupts = 0;
};

// A turn (append or generation) ended; every token of it came first.
// An append's tokens are in the context (before their prefill).
struct EngineAppended {
  uint64_t turn = 0;
  uint64_t pos = 0;       // context length after them
  uint32_t n_tokens = 0;  // this append's
};

// An error the engine reported; it belongs to the turn whose end comes next.
struct EngineError {
  enum Kind {
    kEngine,        // I/O, GPU: ERROR ENGINE (and DONE `error` for a generation)
    kContextFull,   // a fixed cache refused an append whole: ERROR CONTEXT_FULL
    kEmptyContext,  // a generation found nothing to continue from: ERROR BAD_VALUE, no DONE
  } kind = kEngine;
  std::string message;
};

struct EngineTurnEnd {
  uint64_t turn = 0;
  DoneReason reason = DoneReason::kLimit;  // for a generating turn
  uint64_t pos = 0;                        // context length after the turn
  uint64_t prefilled = 0, generated = 0;
  double prefill_ms = 0.0, decode_ms = 0.0;
  std::string tail_text;  // what the detokenizer held back
};

// ---- session -> engine. Turns are numbered from 1 in the order they are commanded.

struct AppendCommand {
  uint64_t turn = 0;
  std::string text;
  std::vector<int32_t> ids;
};
struct GenerateCommand {
  uint64_t turn = 0;
  int64_t max_tokens = 0;
  bool own_sampling = false;  // else the server's (GENERATE DEFAULT_SAMPLING)
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
  bool stop_at_eot = true;  // end ids end the turn (emitted, kept)
  bool gated = false;       // the gate may end it
  std::vector<int32_t> stop_ids;
};
struct InterruptCommand {};
// Answered by reset_done(). preamble: the new context and every later one open with these ids
// (a client's tools joined the system turn, §4.21); none: as before.
struct ResetCommand {
  std::optional<std::vector<int32_t>> preamble;
};
struct TraceMarkCommand {
  std::string label;
};
// A memory request, answered by memory_reply() with the same ticket (tickets count from 1,
// apart from turns). kDrain: commit what is being written (SHUTDOWN), answered silently.
struct MemoryCommand {
  enum Kind { kRecall, kStore, kForget, kQuery, kDrain } kind = kQuery;
  uint64_t ticket = 0;
  std::string text;         // kRecall: the query, appended to the conversation
  uint64_t episode_id = 0;  // kForget
  uint32_t first = 0, max_count = 0;  // kQuery
};
using EngineCommand = std::variant<AppendCommand, GenerateCommand, InterruptCommand, ResetCommand,
                                   TraceMarkCommand, MemoryCommand>;

// ---- engine -> session, memory

// The answer to MemoryCommand `ticket`: a memory answer frame (MEMORY_RECALLED, ...) or an
// ErrorFrame. pos: the context length after it (a recall appends its query), -1 if unchanged.
struct EngineMemoryReply {
  uint64_t ticket = 0;
  ServerMessage answer = MemoryWatchAck{};
  int64_t pos = -1;
  uint64_t prefilled = 0;  // tokens read (a recall's query), for STATS
  double prefill_ms = 0.0;
};
// Something happened to an episode. Its cause: a MemoryCommand's ticket, or a generating turn
// (its automatic recall); both 0: background consolidation.
struct EngineMemoryEvent {
  MemoryEvent event;
  uint64_t cause_ticket = 0;
  uint64_t cause_turn = 0;
};

struct Outgoing {
  uint32_t request_id = 0;
  ServerMessage message;
};

// What one call produced, in order: frames to write, then commands to run.
struct SessionOutput {
  std::vector<Outgoing> frames;
  std::vector<EngineCommand> commands;
  void clear() {
    frames.clear();
    commands.clear();
  }
};

class ServeSession {
 public:
  // `hello` is what HELLO is answered with (its limits bound the requests); -n is
  // default_max_tokens; now_ns: a monotonic clock (STATS uptime, TRACE_MARK_ACK).
  ServeSession(ServerHello hello, int64_t default_max_tokens, std::function<int64_t()> now_ns);

  // Stream tokens the KV cache holds at most (STATS kv_tokens): the ring's anchors + window, its
  // recall slots holding recalled rows rather than the stream. Default: context_tokens.
  void set_stream_capacity(int64_t n) { stream_capacity_ = n; }
  // Tokens every context opens with, at start and after each RESET (--serve --system's turn):
  // counted in STATS pos, and GENERATE needs no append first.
  // Episodic memory is served (--memory): its frames are taken, not answered NOT_AVAILABLE.
  void set_memory(bool on) {
    memory_ = on;
    reader_.set_memory(on);
  }
  // Tool frames are served by `tools` (--tools; it must outlive the session); nullptr: they are
  // answered NOT_AVAILABLE, whatever their payload.
  void set_tools(ToolFrames* tools) {
    tools_ = tools;
    reader_.set_tools(tools != nullptr);
  }
  void set_preamble(int64_t tokens) {
    preamble_ = tokens;
    sent_preamble_ = tokens;
    pos_ = tokens;
    reader_.set_preamble(tokens > 0);
  }

  // Bytes from the client; every frame they complete is handled.
  void feed(std::span<const uint8_t> bytes, SessionOutput& out);
  // The client's input ended: TRUNCATED if inside a frame, then the session ends as on SHUTDOWN,
  // without SHUTDOWN_ACK.
  void end_of_input(SessionOutput& out);
  // The client's output is gone: nothing more is written; the session ends.
  void output_closed(SessionOutput& out);

  void appended(const EngineAppended& a, SessionOutput& out);
  void token(const EngineToken& t, SessionOutput& out);
  void turn_end(const EngineTurnEnd& e, SessionOutput& out);
  void reset_done(SessionOutput& out);
  void engine_error(EngineError e, SessionOutput& out);
  void memory_reply(EngineMemoryReply r, SessionOutput& out);
  void memory_event(const EngineMemoryEvent& e, SessionOutput& out);
  bool watching() const { return watching_; }
  void tool_call(const EngineToolCall& c, SessionOutput& out);
  void tool_event(const EngineToolEvent& e, SessionOutput& out);
  uint32_t tool_events_mask() const { return tool_events_mask_; }

  // No more client input is read (SHUTDOWN, VERSION_MISMATCH, EOF, closed output).
  bool reading_done() const { return closing_; }
  // The session is over: every request answered, the last frame written. Exit with
  // exit_status().
  bool finished() const { return finished_; }
  int exit_status() const { return exit_status_; }
  bool generating() const { return gen_turn_ != 0; }

 private:
  // The GATE frame's urgency (§4.8) with this many tool interrupts pending.
  float urgency(uint32_t pending_interrupts) const;
  // Events name their cause while it may still be at work: the latest requests suffice.
  static constexpr size_t kMaxCauses = 256;

  // An answer that waits for the engine, in request order.
  struct Pending {
    // kReady: an answer made at once (TRACE_MARK_ACK, an ERROR) that waits for those before it.
    // kMemory: a memory answer; kSilent: the same without a frame (SHUTDOWN's drain).
    enum Kind { kAppended, kResetAck, kStats, kReady, kMemory, kSilent } kind = kAppended;
    uint32_t rid = 0;
    uint64_t turn = 0;  // kAppended: its turn; kMemory, kSilent: the command's ticket
    Opcode opcode = Opcode::kAppendText;  // kAppended: the frame it answers
    bool done = false;  // the engine answered; the frame is `frame`
    ServerMessage frame;
    int64_t preamble = 0;  // kResetAck: the ids the context opens with after that reset
  };
  struct QueuedAppend {  // an APPEND or memory frame that arrived while generating
    uint32_t rid = 0;
    ClientMessage message;
  };
  // Who caused what: a ticket or turn and the request id of its frame (MEMORY_EVENT's).
  struct Cause {
    bool ticket = false;
    uint64_t number = 0;
    uint32_t rid = 0;
  };

  void handle(uint32_t rid, const ClientMessage& m, SessionOutput& out);
  void send_append(uint32_t rid, const ClientMessage& m, SessionOutput& out);
  // An APPEND or memory frame, now or (generating) after DONE.
  void take_input(uint32_t rid, const ClientMessage& m, SessionOutput& out);
  void send_memory(uint32_t rid, const ClientMessage& m, SessionOutput& out);
  uint64_t command_memory(MemoryCommand c, uint32_t rid, SessionOutput& out);
  void remember_cause(bool ticket, uint64_t number, uint32_t rid);
  // The request id of the frame that began turn `turn`, or 0 when it is forgotten.
  uint32_t turn_cause(uint64_t turn) const;
  // A tool frame, handed to tools_ and answered in order (serve_session_tools.cpp).
  void take_tool_frame(uint32_t rid, const ClientMessage& m, SessionOutput& out);
  void start_generation(uint32_t rid, const Generate& g, SessionOutput& out);
  void interrupt(SessionOutput& out);
  void flush_queue(SessionOutput& out);
  void release_answers(SessionOutput& out);
  void begin_close(int status, bool ack, SessionOutput& out);
  void maybe_finish(SessionOutput& out);
  void write(uint32_t rid, ServerMessage m, SessionOutput& out);
  // An answer to a client frame, in arrival order: written now unless answers wait before it.
  void answer(uint32_t rid, ServerMessage m, SessionOutput& out);
  void end_generation(SessionOutput& out);
  // An error with nowhere else to go: ERROR ENGINE with request id 0.
  void flush_engine_error(SessionOutput& out);
  Stats current_stats() const;

  ServerHello hello_;
  int64_t default_max_tokens_;
  std::function<int64_t()> now_ns_;
  int64_t start_ns_;
  ServerReader reader_;
  uint64_t next_turn_ = 1;

  std::deque<Pending> answers_;
  std::vector<QueuedAppend> queued_;

  // The running generation (gen_turn_ 0: none).
  uint64_t gen_turn_ = 0;
  uint32_t gen_rid_ = 0;
  uint32_t gen_flags_ = 0;
  uint32_t gen_sent_ = 0;  // TOKEN frames sent
  uint32_t gen_last_id_ = kNoToken;
  bool gen_interrupted_ = false;
  std::optional<EngineError> engine_error_;  // for the next turn end

  // Ending.
  bool closing_ = false;
  bool ack_on_close_ = false;
  uint32_t shutdown_rid_ = 0;
  bool output_closed_ = false;
  int64_t stream_capacity_ = -1;  // < 0: hello_.context_tokens
  bool finished_ = false;
  int exit_status_ = 0;

  // Episodic memory.
  bool memory_ = false;
  bool watching_ = false;
  uint64_t next_ticket_ = 1;
  std::deque<Cause> causes_;  // the latest kMaxCauses

  // Tools.
  ToolFrames* tools_ = nullptr;
  uint32_t tool_events_mask_ = 0;  // TOOL_EVENTS: which kinds go out

  // STATS, over the session.
  int64_t pos_ = 0;
  int64_t preamble_ = 0;
  // The system turn the next RESET passes to the engine (ToolFrames::opening_turn after a
  // TOOL_DECLARE), and the length of the one the engine opens contexts with from the last RESET
  // sent on (preamble_ becomes it when that reset is done).
  std::optional<std::vector<int32_t>> next_preamble_;
  int64_t sent_preamble_ = 0;
  uint64_t prefill_tokens_ = 0, decode_tokens_ = 0, generations_ = 0;
  double prefill_ms_ = 0.0, decode_ms_ = 0.0;
};

}  // namespace infer::protocol
