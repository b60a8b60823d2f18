// ServeSession (serve_session.h): each client frame, engine event and ending becomes frames and
// commands in one SessionOutput; answers that wait for the engine sit in answers_ in request
// order and go out as soon as every one before them has.
#include "protocol/serve_session.h"

#include <algorithm>
#include <cmath>

#include "base/overload.h"

namespace infer::protocol {

ServeSession::ServeSession(ServerHello hello, int64_t default_max_tokens,
                           std::function<int64_t()> now_ns)
    : hello_(std::move(hello)),
      default_max_tokens_(default_max_tokens),
      now_ns_(std::move(now_ns)),
      start_ns_(now_ns_()),
      reader_(SessionLimits{hello_.vocab_size, hello_.max_generate_tokens}) {}

void ServeSession::write(uint32_t rid, ServerMessage m, SessionOutput& out) {
  if (!output_closed_) out.frames.push_back(Outgoing{rid, std::move(m)});
}

void ServeSession::answer(uint32_t rid, ServerMessage m, SessionOutput& out) {
  if (answers_.empty()) {
    write(rid, std::move(m), out);
  } else {
    answers_.push_back(Pending{Pending::kReady, rid, 0, Opcode::kHello, true, std::move(m)});
  }
}

void ServeSession::feed(std::span<const uint8_t> bytes, SessionOutput& out) {
  if (closing_) return;
  std::vector<ReaderEvent> events;
  reader_.feed(bytes, events);
  for (const ReaderEvent& ev : events) {
    if (const auto* rej = std::get_if<Rejected>(&ev)) {
      answer(rej->request_id, ServerMessage{rej->error_frame()}, out);
      if (rej->ends_session) begin_close(1, /*ack=*/true, out);  // VERSION_MISMATCH
      continue;
    }
    const auto& acc = std::get<Accepted>(ev);
    handle(acc.request_id, acc.message, out);
  }
}

void ServeSession::handle(uint32_t rid, const ClientMessage& m, SessionOutput& out) {
  std::visit(
      Overload{
          [&](const Hello&) { write(rid, ServerMessage{hello_}, out); },
          [&](const AppendText&) { take_input(rid, m, out); },
          [&](const AppendIds&) { take_input(rid, m, out); },
          [&](const MemoryRecall&) { take_input(rid, m, out); },
          [&](const MemoryStore&) { take_input(rid, m, out); },
          [&](const MemoryForget&) { take_input(rid, m, out); },
          [&](const MemoryQuery&) { take_input(rid, m, out); },
          [&](const MemoryWatch&) { take_input(rid, m, out); },
          [&](const ToolDeclare&) { take_tool_frame(rid, m, out); },
          [&](const ToolResult&) { take_tool_frame(rid, m, out); },
          [&](const ToolEvents&) { take_tool_frame(rid, m, out); },
          [&](const PtyOpen&) { take_tool_frame(rid, m, out); },
          [&](const PtyWrite&) { take_tool_frame(rid, m, out); },
          [&](const PtyResize&) { take_tool_frame(rid, m, out); },
          [&](const PtyClose&) { take_tool_frame(rid, m, out); },
          [&](const PtyRead&) { take_tool_frame(rid, m, out); },
          [&](const InterruptAction&) { take_tool_frame(rid, m, out); },
          [&](const InterruptRaise&) { take_tool_frame(rid, m, out); },
          [&](const Generate& g) { start_generation(rid, g, out); },
          [&](const Interrupt&) {
            if (gen_turn_ != 0) interrupt(out);  // idle: ignored, no answer
          },
          [&](const StatsRequest&) {  // counted when its turn to be answered comes
            if (answers_.empty()) {
              write(rid, ServerMessage{current_stats()}, out);
            } else {
              answers_.push_back(Pending{Pending::kStats, rid});
            }
          },
          [&](const TraceMark& t) {
            out.commands.push_back(TraceMarkCommand{t.label});
            answer(rid, ServerMessage{TraceMarkAck{uint64_t(now_ns_() - start_ns_), t.label}}, out);
          },
          [&](const Reset&) {
            // As INTERRUPT, then the queued appends, then the reset: DONE, APPENDEDs, RESET_ACK.
            if (gen_turn_ != 0) interrupt(out);
            flush_queue(out);
            Pending ack{Pending::kResetAck, rid};
            ResetCommand reset;
            if (next_preamble_) {
              sent_preamble_ = int64_t(next_preamble_->size());
              reset.preamble = std::move(next_preamble_);
              next_preamble_.reset();
            }
            ack.preamble = sent_preamble_;
            answers_.push_back(std::move(ack));
            out.commands.push_back(std::move(reset));
          },
          [&](const Shutdown&) {
            shutdown_rid_ = rid;
            begin_close(0, /*ack=*/true, out);
          },
      },
      m);
}

void ServeSession::take_input(uint32_t rid, const ClientMessage& m, SessionOutput& out) {
  if (gen_turn_ != 0) {
    queued_.push_back({rid, m});
  } else if (std::holds_alternative<AppendText>(m) || std::holds_alternative<AppendIds>(m)) {
    send_append(rid, m, out);
  } else {
    send_memory(rid, m, out);
  }
}

void ServeSession::send_append(uint32_t rid, const ClientMessage& m, SessionOutput& out) {
  AppendCommand c;
  c.turn = next_turn_++;
  if (const auto* t = std::get_if<AppendText>(&m)) {
    c.text = t->text;
  } else {
    const auto& ids = std::get<AppendIds>(m).ids;
    c.ids.assign(ids.begin(), ids.end());
  }
  const Opcode op =
      std::holds_alternative<AppendText>(m) ? Opcode::kAppendText : Opcode::kAppendIds;
  answers_.push_back(Pending{Pending::kAppended, rid, c.turn, op});
  out.commands.push_back(std::move(c));
}

void ServeSession::start_generation(uint32_t rid, const Generate& g, SessionOutput& out) {
  GenerateCommand c;
  c.turn = next_turn_++;
  c.max_tokens = g.max_tokens != 0 ? int64_t(g.max_tokens) : default_max_tokens_;
  // The request's own sampling unless it asks for the server's (--temperature etc.).
  c.own_sampling = (g.flags & kGenDefaultSampling) == 0;
  c.temperature = g.temperature;
  c.top_k = int32_t(std::min<uint32_t>(g.top_k, uint32_t(INT32_MAX)));  // beyond V: no cut
  c.top_p = g.top_p;
  c.seed = g.seed;
  c.stop_at_eot = (g.flags & kGenStopAtEot) != 0;
  c.gated = (g.flags & kGenGated) != 0;
  c.stop_ids.assign(g.stop_ids.begin(), g.stop_ids.end());
  gen_turn_ = c.turn;
  gen_rid_ = rid;
  gen_flags_ = g.flags;
  gen_sent_ = 0;
  gen_last_id_ = kNoToken;
  gen_interrupted_ = false;
  remember_cause(false, c.turn, rid);  // its automatic recall
  out.commands.push_back(std::move(c));
}

void ServeSession::interrupt(SessionOutput& out) {
  if (!gen_interrupted_) out.commands.push_back(InterruptCommand{});
  gen_interrupted_ = true;
}

void ServeSession::flush_queue(SessionOutput& out) {
  std::vector<QueuedAppend> q;
  q.swap(queued_);
  for (const QueuedAppend& a : q) {  // now, even before the interrupted generation's DONE
    if (std::holds_alternative<AppendText>(a.message) ||
        std::holds_alternative<AppendIds>(a.message)) {
      send_append(a.rid, a.message, out);
    } else {
      send_memory(a.rid, a.message, out);
    }
  }
}

void ServeSession::release_answers(SessionOutput& out) {
  while (!answers_.empty()) {
    Pending& p = answers_.front();
    if (p.kind == Pending::kStats) {
      write(p.rid, ServerMessage{current_stats()}, out);
    } else if (p.done && p.kind == Pending::kSilent) {
      // nothing to write
    } else if (p.done) {
      write(p.rid, std::move(p.frame), out);
    } else {
      break;
    }
    answers_.pop_front();
  }
  maybe_finish(out);
}

void ServeSession::begin_close(int status, bool ack, SessionOutput& out) {
  if (closing_) return;
  closing_ = true;
  exit_status_ = status;
  ack_on_close_ = ack;
  // Queued appends are dropped; queued memory requests are still answered after the DONE (a
  // MEMORY_STORE sent before SHUTDOWN stores).
  std::erase_if(queued_, [](const QueuedAppend& q) {
    return std::holds_alternative<AppendText>(q.message) ||
           std::holds_alternative<AppendIds>(q.message);
  });
  if (gen_turn_ != 0) interrupt(out);
  if (ack && memory_) {  // SHUTDOWN_ACK after the episodes being written are committed (§4.19)
    MemoryCommand drain;
    drain.kind = MemoryCommand::kDrain;
    const uint64_t ticket = command_memory(std::move(drain), 0, out);
    answers_.push_back(Pending{Pending::kSilent, 0, ticket});
  }
  maybe_finish(out);
}

void ServeSession::maybe_finish(SessionOutput& out) {
  if (!closing_ || finished_ || gen_turn_ != 0 || !answers_.empty()) return;
  if (ack_on_close_) write(shutdown_rid_, ServerMessage{ShutdownAck{}}, out);
  finished_ = true;
  output_closed_ = true;  // the last frame is written
}

void ServeSession::end_of_input(SessionOutput& out) {
  if (closing_) return;
  if (const std::optional<Rejected> rej = reader_.finish()) {
    write(0, ServerMessage{rej->error_frame()}, out);
  }
  begin_close(0, /*ack=*/false, out);
}

void ServeSession::output_closed(SessionOutput& out) {
  output_closed_ = true;
  begin_close(exit_status_, /*ack=*/false, out);
}

Stats ServeSession::current_stats() const {
  Stats s;
  s.pos = uint64_t(pos_);
  const int64_t held = stream_capacity_ >= 0 ? stream_capacity_ : int64_t(hello_.context_tokens);
  s.kv_tokens = uint64_t(std::min<int64_t>(pos_, held));
  s.prefill_tokens = prefill_tokens_;
  s.decode_tokens = decode_tokens_;
  s.generations = generations_;
  s.prefill_tok_s = prefill_ms_ > 0 ? double(prefill_tokens_) / prefill_ms_ * 1e3 : 0.0;
  s.decode_tok_s = decode_ms_ > 0 ? double(decode_tokens_) / decode_ms_ * 1e3 : 0.0;
  s.uptime_ms = uint64_t((now_ns_() - start_ns_) / 1000000);
  s.flags = gen_turn_ != 0 ? kStatsGenerating : 0;
  s.queued_appends = uint32_t(
      std::count_if(queued_.begin(), queued_.end(), [](const QueuedAppend& q) {
        return std::holds_alternative<AppendText>(q.message) ||
               std::holds_alternative<AppendIds>(q.message);
      }));
  return s;
}

// ---- the engine's side

void ServeSession::appended(const EngineAppended& a, SessionOutput& out) {
  for (Pending& p : answers_) {
    if (p.kind == Pending::kAppended && p.turn == a.turn && !p.done) {
      pos_ = int64_t(a.pos);
      p.frame = ServerMessage{Appended{a.pos, a.n_tokens}};
      p.done = true;
      break;
    }
  }
  release_answers(out);
}

// §4.8: 1 while client input waits (it outranks everything); else 1 - 2^-n for n pending tool
// interrupts (0.5 for one, 0.75 for two, ...), 0 with none.
float ServeSession::urgency(uint32_t pending_interrupts) const {
  if (!queued_.empty()) return 1.0f;
  return 1.0f - std::ldexp(1.0f, -int(std::min<uint32_t>(pending_interrupts, 126)));
}

void ServeSession::token(const EngineToken& t, SessionOutput& out) {
  pos_ = std::max(pos_, int64_t(t.pos) + 1);
  // Every token of the turn goes out, also those generated before an INTERRUPT took effect:
  // each is in the context, so a client that rebuilds the stream from its TOKENs gets this one.
  if (t.turn != gen_turn_) return;
  write(gen_rid_, ServerMessage{Token{t.id, gen_sent_, t.pos, t.text}}, out);
  if (t.inserted) {  // no step of the model: no GATE, and DONE's last_id stays the generated one
    ++gen_sent_;
    return;
  }
  if ((gen_flags_ & kGenGateEvents) != 0 || t.decision != GateDecision::kSpeak) {
    Gate g;
    g.decision = t.decision;
    g.index = gen_sent_;
    g.entropy = t.entropy;
    g.top_prob = t.top_prob;
    g.eot_prob = t.eot_prob;
    g.urgency = urgency(t.pending_interrupts);
    g.cost_ms = t.cost_ms;
    write(gen_rid_, ServerMessage{g}, out);
  }
  ++gen_sent_;
  gen_last_id_ = t.id;
}

void ServeSession::turn_end(const EngineTurnEnd& e, SessionOutput& out) {
  const int64_t before = pos_;
  pos_ = int64_t(e.pos);
  prefill_tokens_ += e.prefilled;
  decode_tokens_ += e.generated;
  prefill_ms_ += e.prefill_ms;
  decode_ms_ += e.decode_ms;
  std::optional<EngineError> err;
  err.swap(engine_error_);
  if (e.turn == gen_turn_) {
    if (err && err->kind == EngineError::kEmptyContext && gen_sent_ == 0) {
      // Refused, not failed: one ERROR, no DONE (§8), as the reader refuses it when it knows.
      write(gen_rid_,
            ServerMessage{ErrorFrame{WireError::kBadValue, uint16_t(Opcode::kGenerate),
                                     "GENERATE with an empty context: " + err->message}},
            out);
    } else {
      if (err) {
        write(gen_rid_,
              ServerMessage{ErrorFrame{WireError::kEngine, uint16_t(Opcode::kGenerate),
                                       err->message}},
              out);
      }
      Done d;
      d.reason = err ? DoneReason::kError : e.reason;
      d.n_tokens = gen_sent_;
      d.pos = e.pos;
      d.last_id = gen_last_id_;
      d.text = e.tail_text;
      write(gen_rid_, ServerMessage{d}, out);
      ++generations_;
    }
    end_generation(out);
  } else {
    for (Pending& p : answers_) {  // not done: the append was refused (appended() says the rest)
      if (p.kind == Pending::kAppended && p.turn == e.turn && !p.done) {
        if (err) {  // nothing of the frame went in: its ERROR in place of APPENDED
          const WireError code =
              err->kind == EngineError::kContextFull ? WireError::kContextFull : WireError::kEngine;
          p.frame = ServerMessage{ErrorFrame{code, uint16_t(p.opcode), err->message}};
          if (pos_ == preamble_) reader_.set_has_context(preamble_ > 0);
        } else {
          p.frame = ServerMessage{Appended{e.pos, uint32_t(std::max<int64_t>(0, pos_ - before))}};
        }
        p.done = true;
        err.reset();
        break;
      }
    }
    if (err) {
      engine_error_ = std::move(err);
      flush_engine_error(out);
    }
  }
  release_answers(out);
}

void ServeSession::end_generation(SessionOutput& out) {
  gen_turn_ = 0;
  reader_.generation_done();
  flush_queue(out);  // when closing, only memory requests
}

void ServeSession::flush_engine_error(SessionOutput& out) {
  if (!engine_error_) return;
  write(0, ServerMessage{ErrorFrame{WireError::kEngine, 0, engine_error_->message}}, out);
  engine_error_.reset();
}

void ServeSession::reset_done(SessionOutput& out) {
  flush_engine_error(out);
  for (Pending& p : answers_) {
    if (p.kind == Pending::kResetAck && !p.done) {
      preamble_ = p.preamble;
      p.frame = ServerMessage{ResetAck{}};
      p.done = true;
      break;
    }
  }
  pos_ = preamble_;
  release_answers(out);
}

void ServeSession::engine_error(EngineError e, SessionOutput& out) {
  flush_engine_error(out);  // one before it that no turn end claimed
  engine_error_ = std::move(e);
}

}  // namespace infer::protocol
