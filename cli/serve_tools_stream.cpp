// ServeTools' events (docs/PROTOCOL.md §4.28, §4.29): PTY output read as it is drained, the
// interrupt set's transitions with the frame that caused them, and the engine's tool events and
// inserted tokens put in the order the spec wants (an event that says where tokens went comes
// before them).
#include <algorithm>
#include <chrono>

#include "cli/serve_tools.h"

namespace infer::cli {
namespace {

// Events waiting for the front end; past this, PTY output is skipped (the next event's offsets
// show the gap and PTY_READ fetches it) rather than queued without bound (§4.28).
constexpr size_t kMaxQueuedEvents = 1024;
constexpr size_t kMaxOutputEventBytes = size_t(64) << 10;  // per view, per event

}  // namespace

void ServeTools::push_event(protocol::EngineToolEvent e) {
  if (!stopped_) queue_.push_back(std::move(e));
}

void ServeTools::on_pty_event(const tools::PtyEvent& e) {
  if (e.kind == tools::PtyEvent::Kind::kClosed) return;  // pty_close told it, with its cause
  adapter_.on_event(e);  // its interrupt holds this text before a client can see the output
  const tools::PtySet* ptys = drained_.load();
  if (ptys == nullptr) return;
  std::lock_guard lock(q_mu_);
  if (e.kind == tools::PtyEvent::Kind::kExited) {
    push_event({protocol::ToolEvent{pty_state_event(e.id, e.status)}, 0, 0});
    return;
  }
  Offsets& at = offsets_[e.id];
  Result<tools::PtyRead> raw = ptys->read_raw(e.id, at.raw, kMaxOutputEventBytes);
  Result<tools::PtyRead> text = ptys->read_text(e.id, at.text, kMaxOutputEventBytes);
  if (!raw || !text) return;  // closed meanwhile
  const bool room = queue_.size() < kMaxQueuedEvents;
  if (room && (!raw->bytes.empty() || !text->bytes.empty())) {
    protocol::PtyOutputEvent out;
    out.pty_id = e.id;
    out.raw_from = raw->from;
    out.text_from = text->from;
    out.raw = std::move(raw->bytes);
    out.text = std::move(text->bytes);
    push_event({protocol::ToolEvent{std::move(out)}, 0, 0});
  }
  // Skipped output (no room, or more than one event holds) is left behind, not queued later.
  at.raw = raw->end;
  at.text = text->end;
}

void ServeTools::take_interrupt_events(std::vector<protocol::EngineToolEvent>& out) {
  for (const tools::InterruptEvent& e : interrupts_.take_events()) {
    last_interrupt_id_ = std::max(last_interrupt_id_, e.id);
    if (tracer_ != nullptr) {
      const int64_t at_ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(e.at.time_since_epoch()).count();
      tracer_->span("interrupts", tools::interrupt_event_name(e.kind), at_ns, at_ns, int64_t(e.id));
    }
    const auto delay = snooze_ms_.find(e.id);
    protocol::InterruptEvent w = interrupt_event(e, delay != snooze_ms_.end() ? delay->second : 0);
    if (e.kind == tools::InterruptEventKind::kInjected) {
      injected_[e.id] = w;  // goes out with its tokens' position (token())
      continue;
    }
    uint32_t cause = 0;
    const bool decided = e.kind == tools::InterruptEventKind::kAcked ||
                         e.kind == tools::InterruptEventKind::kSnoozed ||
                         e.kind == tools::InterruptEventKind::kDropped;
    if (const auto it = action_cause_.find(e.id); decided && it != action_cause_.end()) {
      cause = it->second;
      action_cause_.erase(it);
    }
    if (e.kind == tools::InterruptEventKind::kDropped) snooze_ms_.erase(e.id);
    out.push_back({protocol::ToolEvent{w}, cause, 0});
  }
}

void ServeTools::take_events(std::vector<protocol::EngineToolEvent>& out) {
  {
    std::lock_guard lock(q_mu_);
    if (stopped_) return;
    out.insert(out.end(), std::make_move_iterator(queue_.begin()),
               std::make_move_iterator(queue_.end()));
    queue_.clear();
  }
  take_interrupt_events(out);
}

void ServeTools::flush_response(ToolStreamOutput& out) {
  if (!held_ran_) return;
  auto& ran = std::get<protocol::ToolRanEvent>(held_ran_->event.event);
  ran.pos = held_tokens_.empty() ? 0 : held_tokens_.front().pos;
  ran.n_tokens = uint32_t(held_tokens_.size());
  out.items.push_back(std::move(*held_ran_));
  for (protocol::EngineToken& t : held_tokens_) out.items.push_back(std::move(t));
  held_ran_.reset();
  held_tokens_.clear();
}

void ServeTools::engine_event(const actors::ToolEvent& e, ToolStreamOutput& out) {
  flush_response(out);
  switch (e.kind) {
    case actors::ToolEventKind::kClientCall: {
      calls_[e.call_id] = ClientCall{e.turn, CallState::kOut};
      protocol::ToolCall call;
      call.call_id = uint32_t(e.call_id);
      call.name = e.name;
      call.arguments = e.arguments.empty() ? "{}" : e.arguments;
      out.items.push_back(protocol::EngineToolCall{e.turn, std::move(call)});
      break;
    }
    case actors::ToolEventKind::kResult:
    case actors::ToolEventKind::kError:
      // The engine is done with the call (a client's late answer is OUT_OF_ORDER from now).
      if (const auto it = calls_.find(e.call_id);
          it != calls_.end() && it->second.state == CallState::kOut) {
        it->second.state = CallState::kCancelled;
      }
      held_ran_ = protocol::EngineToolEvent{
          protocol::ToolEvent{tool_ran_event(e, calls_.count(e.call_id) != 0)}, 0, e.turn};
      break;
    case actors::ToolEventKind::kCall:
    case actors::ToolEventKind::kNotRun: break;  // the call's TOKENs and tool_ran tell it
  }
}

void ServeTools::token(actors::TokenOrigin origin, protocol::EngineToken t,
                       ToolStreamOutput& out) {
  if (origin == actors::TokenOrigin::kToolResponse && held_ran_) {
    held_tokens_.push_back(std::move(t));
    return;
  }
  flush_response(out);
  if (origin == actors::TokenOrigin::kInterrupt && injecting_left_ == 0) {
    std::vector<protocol::EngineToolEvent> before;
    take_interrupt_events(before);  // its `acked` first, and its `injected` at hand
    for (protocol::EngineToolEvent& e : before) out.items.push_back(std::move(e));
    std::pair<tools::InterruptId, int64_t> next{0, 0};
    {
      std::lock_guard lock(q_mu_);
      if (!injections_.empty()) {
        next = injections_.front();
        injections_.erase(injections_.begin());
      }
    }
    if (const auto it = injected_.find(next.first); it != injected_.end()) {
      protocol::InterruptEvent w = it->second;
      w.pos = t.pos;
      w.n_tokens = uint32_t(next.second);
      injected_.erase(it);
      snooze_ms_.erase(next.first);
      out.items.push_back(protocol::EngineToolEvent{protocol::ToolEvent{w}, 0, t.turn});
    }
    injecting_left_ = next.second;
  }
  if (origin == actors::TokenOrigin::kInterrupt && injecting_left_ > 0) --injecting_left_;
  out.items.push_back(std::move(t));
}

void ServeTools::turn_ended(uint64_t turn, ToolStreamOutput& out) {
  flush_response(out);
  for (auto& [id, call] : calls_) {
    if (call.turn == turn && call.state == CallState::kOut) call.state = CallState::kCancelled;
  }
  interrupts_.end_turn();
}

void ServeTools::shutdown() {
  {
    std::lock_guard lock(q_mu_);
    stopped_ = true;
    queue_.clear();
  }
  for (const tools::PtyInfo& p : ptys_->list()) (void)ptys_->close(p.id);
  // The grace (1 s) and the kill: the drain thread reaps them.
  ptys_->wait_all_closed(std::chrono::seconds(3));
}

}  // namespace infer::cli
