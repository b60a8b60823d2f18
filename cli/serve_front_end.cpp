// ServeFrontEnd: actor events become protocol::ServeSession events; the session's frames go to
// stdout and its commands to the pipeline, both under mu_ so that turn numbers, frames and
// pipeline calls keep one order.
#include "cli/serve_front_end.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <variant>

#include "base/check.h"
#include "base/overload.h"
#include "cli/serve_memory.h"
#include "protocol/encode.h"

namespace infer::cli {
namespace {

protocol::DoneReason done_reason(actors::StopReason r) {
  switch (r) {
    case actors::StopReason::kEndToken: return protocol::DoneReason::kEos;
    case actors::StopReason::kStopId: return protocol::DoneReason::kStopId;
    case actors::StopReason::kInterrupted: return protocol::DoneReason::kInterrupted;
    case actors::StopReason::kGate: return protocol::DoneReason::kGate;
    case actors::StopReason::kError: return protocol::DoneReason::kError;
    default: return protocol::DoneReason::kLimit;  // token limit, context full
  }
}

protocol::GateDecision gate_decision(actors::Decision d) {
  switch (d) {
    case actors::Decision::kListen: return protocol::GateDecision::kStopAndListen;
    case actors::Decision::kAct: return protocol::GateDecision::kAct;
    default: return protocol::GateDecision::kSpeak;
  }
}

}  // namespace

ServeFrontEnd::ServeFrontEnd(int out_fd, protocol::ServerHello hello, int64_t default_max_tokens,
                             int64_t stream_capacity, int64_t preamble_tokens, bool memory)
    : out_fd_(out_fd), session_(std::move(hello), default_max_tokens, actors::steady_ns) {
  session_.set_memory(memory);
  session_.set_stream_capacity(stream_capacity);
  session_.set_preamble(preamble_tokens);
}

ServeFrontEnd::~ServeFrontEnd() { stop_tool_poll(); }

void ServeFrontEnd::set_tools(ServeTools* tools) {
  tools_ = tools;
  session_.set_tools(tools);
  tool_poll_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stop_poll_ && !session_.finished()) {
      poll_cv_.wait_for(lock, std::chrono::milliseconds(kToolPollMs));
      if (stop_poll_ || session_.finished()) break;
      protocol::SessionOutput out;
      take_tool_events(out);
      carry_out(out);
    }
  });
}

void ServeFrontEnd::stop_tool_poll() {
  {
    std::lock_guard lock(mu_);
    stop_poll_ = true;
  }
  poll_cv_.notify_all();
  if (tool_poll_.joinable()) tool_poll_.join();
}

void ServeFrontEnd::take_tool_events(protocol::SessionOutput& out) {
  if (tools_ == nullptr || session_.finished()) return;
  std::vector<protocol::EngineToolEvent> events;
  tools_->take_events(events);
  for (const protocol::EngineToolEvent& e : events) session_.tool_event(e, out);
}

void ServeFrontEnd::apply(ToolStreamOutput& items, protocol::SessionOutput& out) {
  for (ToolStreamItem& item : items.items) {
    std::visit(Overload{
                   [&](const protocol::EngineToolEvent& e) {
                     if (!session_.finished()) session_.tool_event(e, out);
                   },
                   [&](const protocol::EngineToken& t) { session_.token(t, out); },
                   [&](const protocol::EngineToolCall& c) { session_.tool_call(c, out); },
               },
               item);
  }
}

bool ServeFrontEnd::write_all() {
  size_t done = 0;
  while (done < buf_.size()) {
    const ssize_t n = ::write(out_fd_, buf_.data() + done, buf_.size() - done);
    if (n > 0) {
      done += size_t(n);
    } else if (!(n < 0 && errno == EINTR)) {
      return false;
    }
  }
  return true;
}

void ServeFrontEnd::carry_out(protocol::SessionOutput& out) {
  if (tools_ != nullptr && session_.finished() && !tools_shut_) {
    // Every PTY's program ends and is reaped before SHUTDOWN_ACK (§4.29).
    tools_->shutdown();
    tools_shut_ = true;
  }
  buf_.clear();
  for (const protocol::Outgoing& f : out.frames) protocol::encode(f.message, f.request_id, buf_);
  if (!buf_.empty() && !write_all()) {  // the client went away: the session ends (§7.5)
    std::fprintf(stderr, "infer: --serve: stdout closed, ending the session\n");
    protocol::SessionOutput closed;
    session_.output_closed(closed);  // writes nothing more; may interrupt
    out.commands.insert(out.commands.end(), closed.commands.begin(), closed.commands.end());
  }
  actors::Pipeline& p = *pipeline_;
  for (const protocol::EngineCommand& c : out.commands) {
    std::visit(Overload{
                   [&](const protocol::AppendCommand& a) {
                     const uint64_t turn = p.send(a.text, a.ids, false, 0);
                     INFER_CHECK(turn == a.turn, "turn %llu, session expects %llu",
                                 (unsigned long long)turn, (unsigned long long)a.turn);
                   },
                   [&](const protocol::GenerateCommand& g) {
                     SamplingParams own;
                     own.temperature = g.temperature;
                     own.top_k = g.top_k;
                     own.top_p = g.top_p;
                     own.seed = g.seed;
                     actors::TurnOptions t;
                     t.sampling = g.own_sampling ? &own : nullptr;
                     t.end_ids = g.stop_at_eot ? actors::EndIds::kStopAfter
                                               : actors::EndIds::kIgnore;
                     t.gate_may_stop = g.gated;
                     t.stop_ids = g.stop_ids;
                     const uint64_t turn = p.send("", {}, true, g.max_tokens, std::move(t));
                     INFER_CHECK(turn == g.turn, "turn %llu, session expects %llu",
                                 (unsigned long long)turn, (unsigned long long)g.turn);
                   },
                   [&](const protocol::InterruptCommand&) { p.interrupt(); },
                   [&](const protocol::ResetCommand& c) { p.reset(c.preamble); },
                   [&](const protocol::TraceMarkCommand& m) {
                     if (trace_ != nullptr) trace_->mark("io", m.label, actors::steady_ns());
                   },
                   [&](const protocol::MemoryCommand& m) { p.memory(memory_op(m)); },
               },
               c);
  }
  if (session_.finished()) cv_.notify_all();
}

int ServeFrontEnd::run(int in_fd) {
  uint8_t chunk[65536];
  protocol::SessionOutput out;
  // stdin for input, stdout for its reader going away: a pipe whose reader closed reports
  // POLLERR on the write end, so an idle server notices without writing. The timeout bounds how
  // long a session ended from the io thread (a failed write) waits for the next frame or EOF.
  pollfd fds[2] = {{in_fd, POLLIN, 0}, {out_fd_, 0, 0}};
  for (;;) {
    const int ready = poll(fds, 2, kPollMs);
    if (ready < 0 && errno == EINTR) continue;
    std::lock_guard lock(mu_);
    out.clear();
    if ((fds[1].revents & (POLLERR | POLLHUP)) != 0 && !session_.finished()) {
      std::fprintf(stderr, "infer: --serve: stdout closed, ending the session\n");
      session_.output_closed(out);
      carry_out(out);
      fds[1].fd = -1;  // told once
      out.clear();
    }
    if (session_.finished()) break;
    if (ready < 0 || (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const ssize_t n = ready < 0 ? -1 : read(in_fd, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {  // EOF (or a read error): shut down as on EOF, no SHUTDOWN_ACK
        session_.end_of_input(out);
      } else {
        session_.feed(std::span<const uint8_t>(chunk, size_t(n)), out);
        take_tool_events(out);  // what the frames caused, at once
      }
      carry_out(out);
    }
    if (session_.reading_done()) break;
  }
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return session_.finished(); });
  const int status = session_.exit_status();
  lock.unlock();
  stop_tool_poll();
  return status;
}

// ---- the io actor's side

void ServeFrontEnd::appended(const actors::InputAppended& a) {
  protocol::EngineAppended e;
  e.turn = a.turn;
  e.pos = uint64_t(a.position);
  e.n_tokens = uint32_t(a.n);
  std::lock_guard lock(mu_);
  protocol::SessionOutput out;
  session_.appended(e, out);
  carry_out(out);
}

void ServeFrontEnd::token(const actors::TokenEvent& t) {
  protocol::EngineToken e;
  e.turn = t.turn;
  e.id = uint32_t(t.id);
  e.pos = uint64_t(t.position);
  e.text = t.text;
  e.decision = gate_decision(t.decision);
  e.entropy = t.entropy;
  e.top_prob = t.top_prob;
  e.eot_prob = t.eot_prob;
  e.cost_ms = t.ms_per_token * float(std::max<int64_t>(t.tokens_left, 0));
  e.inserted = t.inserted();
  if (tools_ != nullptr) {
    e.pending_interrupts = uint32_t(std::max<int64_t>(
        0, tools_->pending_counter().load(std::memory_order_relaxed)));
  }
  std::lock_guard lock(mu_);
  protocol::SessionOutput out;
  if (tools_ != nullptr) {
    ToolStreamOutput items;
    tools_->token(t.origin, std::move(e), items);
    apply(items, out);
  } else {
    session_.token(e, out);
  }
  carry_out(out);
}

void ServeFrontEnd::turn_end(const actors::TurnEnd& t) {
  protocol::EngineTurnEnd e;
  e.turn = t.turn;
  e.reason = done_reason(t.reason);
  e.pos = uint64_t(t.position);
  e.prefilled = uint64_t(t.prefilled);
  e.generated = uint64_t(t.generated);
  e.prefill_ms = t.prefill_ms;
  e.decode_ms = t.decode_ms;
  e.tail_text = t.tail_text;
  std::lock_guard lock(mu_);
  protocol::SessionOutput out;
  if (tools_ != nullptr && t.reason != actors::StopReason::kNoGenerate) {
    ToolStreamOutput items;  // a held response; snoozes until the turn's end wake
    tools_->turn_ended(t.turn, items);
    apply(items, out);
  }
  session_.turn_end(e, out);
  carry_out(out);
}

void ServeFrontEnd::reset_done() {
  std::lock_guard lock(mu_);
  protocol::SessionOutput out;
  session_.reset_done(out);
  carry_out(out);
}

void ServeFrontEnd::error(const actors::ErrorEvent& e) {
  std::fprintf(stderr, "infer: --serve: %s\n", e.message.c_str());
  protocol::EngineError err;
  err.kind = e.code == ErrorCode::kContextFull    ? protocol::EngineError::kContextFull
             : e.code == ErrorCode::kEmptyContext ? protocol::EngineError::kEmptyContext
                                                  : protocol::EngineError::kEngine;
  err.message = e.message;
  std::lock_guard lock(mu_);
  protocol::SessionOutput out;
  session_.engine_error(std::move(err), out);
  carry_out(out);
}

void ServeFrontEnd::memory_reply(const actors::MemoryReply& r) {
  protocol::EngineMemoryReply reply = memory_answer(r);
  std::lock_guard lock(mu_);
  protocol::SessionOutput out;
  session_.memory_reply(std::move(reply), out);
  carry_out(out);
}

void ServeFrontEnd::tool_event(const actors::ToolEvent& e) {
  std::lock_guard lock(mu_);
  protocol::SessionOutput out;
  if (tools_ != nullptr) {
    ToolStreamOutput items;
    tools_->engine_event(e, items);
    apply(items, out);
  }
  carry_out(out);
}

void ServeFrontEnd::memory_event(const actors::MemoryNotice& n) {
  const protocol::EngineMemoryEvent e = cli::memory_event(n);
  std::lock_guard lock(mu_);
  protocol::SessionOutput out;
  session_.memory_event(e, out);
  carry_out(out);
}

}  // namespace infer::cli
