// ServeTools: what `infer --serve --tools ROOT` runs the tool frames with (docs/PROTOCOL.md
// §4.20-§4.29): client tools declared to the pipeline, their TOOL_RESULTs, PTYs in ROOT (a
// PtySet) and the interrupt board (an InterruptSet) whose acked interrupts the engine injects at
// token boundaries, as the REPL's ReplTools does. The frames arrive under the serve front end's
// lock (ServeSession calls them); what happens later (PTY output, interrupt transitions, a
// client call, a tool's response) comes back as protocol events through the front end, which
// asks for them with take_events() and routes the pipeline's ToolEvents through engine_event().
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actors/engine.h"
#include "actors/events.h"
#include "actors/pipeline.h"
#include "actors/tracer.h"
#include "base/result.h"
#include "cli/serve_tool_events.h"
#include "model/tokenizer/tokenizer.h"
#include "protocol/tool_frames.h"
#include "tools_vfs/interrupt_sources.h"
#include "tools_vfs/interrupts.h"
#include "tools_vfs/pty_set.h"

namespace infer::cli {

class ServeTools : public protocol::ToolFrames {
 public:
  // PTYs in ROOT (an existing directory); a timer thread wakes delayed snoozes.
  static Result<std::unique_ptr<ServeTools>> open(const std::string& root);
  // Ends and reaps every PTY's program (PtySet's destructor), stops the timer.
  ~ServeTools() override;
  ServeTools(const ServeTools&) = delete;
  ServeTools& operator=(const ServeTools&) = delete;

  // The engine's injection and the gate's urgency: wired into PipelineOptions before the
  // pipeline starts; this object must outlive the pipeline.
  actors::BoundaryInput injection(const Tokenizer& tok);
  const std::atomic<int64_t>& pending_counter() const { return interrupts_.pending_counter(); }
  // The pipeline client tools are declared to and answered through; before the first frame.
  void attach(actors::Pipeline* p) { pipeline_ = p; }
  // --trace: each interrupt transition is an instant span on an "interrupts" track (its
  // argument the interrupt's id), as in the REPL. Null: none.
  void set_tracer(actors::Tracer* tracer) { tracer_ = tracer; }
  // How the system turn that opens every context is written (§4.21): TOOL_DECLARE rewrites it
  // with the client's tools after the built-in ones, for the contexts from the next RESET on,
  // and is refused when it would pass `max_tokens` (the KV ring's anchors, so that eviction
  // never drops a declaration). Without it, client tools are not written into the turn.
  struct OpeningTurn {
    const Tokenizer* tokenizer = nullptr;
    std::string system_text;  // --system's text ("" without it)
    bool special = false;     // --special
    int64_t max_tokens = 0;
  };
  void set_opening_turn(OpeningTurn o) { opening_ = std::move(o); }

  // protocol::ToolFrames (under the front end's lock).
  protocol::ToolReply<protocol::ToolDeclared> declare(uint32_t rid,
                                                      const protocol::ToolDeclare& d) override;
  std::optional<std::vector<int32_t>> opening_turn() override;
  protocol::ToolReply<protocol::ToolAck> result(uint32_t rid,
                                                const protocol::ToolResult& r) override;
  protocol::ToolReply<protocol::PtyOpened> pty_open(uint32_t rid,
                                                    const protocol::PtyOpen& o) override;
  protocol::ToolReply<protocol::ToolAck> pty_write(uint32_t rid,
                                                   const protocol::PtyWrite& w) override;
  protocol::ToolReply<protocol::ToolAck> pty_resize(uint32_t rid,
                                                    const protocol::PtyResize& r) override;
  protocol::ToolReply<protocol::ToolAck> pty_close(uint32_t rid,
                                                   const protocol::PtyClose& c) override;
  protocol::ToolReply<protocol::PtyData> pty_read(uint32_t rid,
                                                  const protocol::PtyRead& r) override;
  protocol::ToolReply<protocol::ToolAck> interrupt_action(
      uint32_t rid, const protocol::InterruptAction& a) override;
  protocol::ToolReply<protocol::InterruptRaised> interrupt_raise(
      uint32_t rid, const protocol::InterruptRaise& r) override;

  // ---- the front end's side, under its lock, in the order things reach it.
  // PTY output and state, interrupt transitions (all but `injected`, which token() tells with
  // its position), in the order they happened.
  void take_events(std::vector<protocol::EngineToolEvent>& out);
  // A pipeline ToolEvent: a client call becomes the TOOL_CALL to send and is remembered so
  // that its TOOL_RESULT is checked; a finished call's `tool_ran` is held until its response's
  // tokens are counted (the event says where they are and goes out before them).
  void engine_event(const actors::ToolEvent& e, ToolStreamOutput& out);
  // A token of the turn, after the events due before it: an injected interrupt's `injected`
  // (its position and size), a held `tool_ran`; a tool response's tokens are held until the
  // response is whole.
  void token(actors::TokenOrigin origin, protocol::EngineToken t, ToolStreamOutput& out);
  // A turn ended: its calls still out are cancelled, snoozes until the turn's end wake up,
  // and what was held goes out.
  void turn_ended(uint64_t turn, ToolStreamOutput& out);
  // The session ends: every PTY closed and its program reaped (bounded by the close grace),
  // and no event follows.
  void shutdown();

 private:
  ServeTools();
  void on_pty_event(const tools::PtyEvent& e);  // the PtySet's drain thread
  void push_event(protocol::EngineToolEvent e);  // q_mu_ held
  // The interrupt set's transitions since the last call, as events (`injected` kept aside in
  // injected_ until its tokens are seen).
  void take_interrupt_events(std::vector<protocol::EngineToolEvent>& out);
  void flush_response(ToolStreamOutput& out);  // the held tool_ran, then its tokens

  enum class CallState : uint8_t { kOut, kAnswered, kCancelled };
  struct ClientCall {
    uint64_t turn = 0;
    CallState state = CallState::kOut;
  };
  struct Offsets {  // where a PTY's next pty_output event starts
    uint64_t raw = 0, text = 0;
  };

  actors::Pipeline* pipeline_ = nullptr;
  actors::Tracer* tracer_ = nullptr;
  OpeningTurn opening_;
  std::vector<ToolDeclaration> client_tools_;          // the last TOOL_DECLARE's
  std::optional<std::vector<int32_t>> opening_ids_;    // its system turn, until taken
  tools::InterruptSet interrupts_;
  tools::PtyInterrupts adapter_;

  // Filled on other threads (drain, decode), emptied under the front end's lock.
  std::mutex q_mu_;
  std::vector<protocol::EngineToolEvent> queue_;
  std::map<tools::PtyId, Offsets> offsets_;
  std::vector<std::pair<tools::InterruptId, int64_t>> injections_;  // taken, not yet seen
  bool stopped_ = false;

  // Under the front end's lock.
  std::map<uint64_t, ClientCall> calls_;  // client calls by call id
  std::map<uint64_t, uint32_t> action_cause_;  // interrupt id -> the INTERRUPT_ACTION's rid
  std::map<uint64_t, uint32_t> snooze_ms_;     // interrupt id -> its latest snooze's delay
  uint64_t last_interrupt_id_ = 0;             // the highest id given out
  std::map<uint64_t, protocol::InterruptEvent> injected_;  // taken, tokens not yet seen
  int64_t injecting_left_ = 0;  // tokens of the interrupt being injected still to come
  std::optional<protocol::EngineToolEvent> held_ran_;  // a tool_ran waiting for its tokens
  std::vector<protocol::EngineToken> held_tokens_;     // its response's tokens so far

  std::unique_ptr<tools::PtySet> ptys_;  // after the adapter and queue: its drain thread ends first
  // ptys_ as the drain thread's events read it: null from the destructor on.
  std::atomic<const tools::PtySet*> drained_{nullptr};
  std::thread timer_;                    // InterruptSet::run_timer
};

}  // namespace infer::cli
