// The --serve session rules on top of the actor pipeline (docs/PROTOCOL.md §6.3, §8):
// - appends go to the pipeline as input-only turns; their TurnEnd becomes APPENDED;
// - a GENERATE is one generating turn; its tokens become TOKEN (and GATE) frames, its TurnEnd
//   DONE; appends that arrive meanwhile wait here and are sent after DONE, in order;
// - the end id that ends a turn is sent as a TOKEN and appended back to the context (the
//   engine leaves it out; the protocol keeps it);
// - after an INTERRUPT is read at most one more TOKEN goes out: tokens the pipeline had in
//   flight beyond it stay in the context (DONE.pos counts them) but are not sent;
// - STATS while generating is answered at once from counters kept here; while idle it goes
//   through the pipeline, so that it follows the APPENDEDs of earlier appends.
#include "cli/serve_front_end.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <variant>

#include "protocol/encode.h"

namespace infer::cli {
namespace {

template <class... F>
struct Overload : F... {
  using F::operator()...;
};
template <class... F>
Overload(F...) -> Overload<F...>;

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

ServeFrontEnd::ServeFrontEnd(int out_fd, protocol::ServerHello hello, int64_t default_max_tokens)
    : out_fd_(out_fd),
      hello_(std::move(hello)),
      default_max_tokens_(default_max_tokens),
      reader_(protocol::SessionLimits{hello_.vocab_size, hello_.max_generate_tokens}) {}

void ServeFrontEnd::write(const protocol::ServerMessage& m, uint32_t rid) {
  append(m, rid);
  flush();
}

void ServeFrontEnd::append(const protocol::ServerMessage& m, uint32_t rid) {
  if (!out_closed_) protocol::encode(m, rid, buf_);
}

void ServeFrontEnd::flush() {
  if (out_closed_) {
    buf_.clear();
    return;
  }
  size_t done = 0;
  while (done < buf_.size()) {
    const ssize_t n = ::write(out_fd_, buf_.data() + done, buf_.size() - done);
    if (n > 0) {
      done += size_t(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {  // the client went away: the session ends (PROTOCOL.md §7.5)
      std::fprintf(stderr, "infer: --serve: stdout closed, ending the session\n");
      out_closed_ = true;
      if (gen_turn_ != 0 && pipeline_ != nullptr) pipeline_->interrupt();
      break;
    }
  }
  buf_.clear();
}

bool ServeFrontEnd::output_closed() {
  std::lock_guard lock(mu_);
  return out_closed_;
}

void ServeFrontEnd::close_output() {
  std::lock_guard lock(mu_);
  out_closed_ = true;
}

ServeFrontEnd::Next ServeFrontEnd::feed(const uint8_t* data, size_t n) {
  std::vector<protocol::ReaderEvent> events;
  std::lock_guard lock(mu_);
  reader_.feed(std::span<const uint8_t>(data, n), events);
  for (const protocol::ReaderEvent& ev : events) {
    if (const auto* rej = std::get_if<protocol::Rejected>(&ev)) {
      write(protocol::ServerMessage{rej->error_frame()}, rej->request_id);
      if (rej->ends_session) return Next::kMismatch;
      continue;
    }
    const auto& acc = std::get<protocol::Accepted>(ev);
    if (const Next next = handle(acc.request_id, acc.message); next != Next::kContinue) {
      return next;
    }
  }
  return out_closed_ ? Next::kShutdown : Next::kContinue;
}

void ServeFrontEnd::eof() {
  std::lock_guard lock(mu_);
  if (const std::optional<protocol::Rejected> rej = reader_.finish()) {
    write(protocol::ServerMessage{rej->error_frame()}, 0);
  }
}

ServeFrontEnd::Next ServeFrontEnd::handle(uint32_t rid, const protocol::ClientMessage& m) {
  actors::Pipeline& p = *pipeline_;
  return std::visit(
      Overload{
          [&](const protocol::Hello&) {
            write(protocol::ServerMessage{hello_}, rid);
            return Next::kContinue;
          },
          [&](const protocol::AppendText&) {
            if (gen_turn_ != 0) {
              queued_.push_back({rid, m});
            } else {
              send_append(rid, m);
            }
            return Next::kContinue;
          },
          [&](const protocol::AppendIds&) {
            if (gen_turn_ != 0) {
              queued_.push_back({rid, m});
            } else {
              send_append(rid, m);
            }
            return Next::kContinue;
          },
          [&](const protocol::Generate& g) {
            start_generation(rid, g);
            return Next::kContinue;
          },
          [&](const protocol::Interrupt&) {
            if (gen_turn_ != 0) interrupt_generation();  // idle: ignored, no answer
            return Next::kContinue;
          },
          [&](const protocol::StatsRequest&) {
            if (gen_turn_ != 0) {
              write(protocol::ServerMessage{current_stats()}, rid);
            } else {
              stats_rids_.push_back(rid);
              p.request_stats();
            }
            return Next::kContinue;
          },
          [&](const protocol::TraceMark& t) {
            if (trace_ != nullptr) trace_->mark("io", t.label, actors::steady_ns());
            const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::steady_clock::now() - start_);
            write(protocol::ServerMessage{protocol::TraceMarkAck{uint64_t(ns.count()), t.label}},
                  rid);
            return Next::kContinue;
          },
          [&](const protocol::Reset&) {
            // As INTERRUPT, then the queued appends, then the reset: DONE, APPENDEDs, RESET_ACK.
            if (gen_turn_ != 0) interrupt_generation();
            flush_queue();
            reset_rids_.push_back(rid);
            p.reset();
            return Next::kContinue;
          },
          [&](const protocol::Shutdown&) {
            shutdown_rid_ = rid;
            return Next::kShutdown;
          },
      },
      m);
}

void ServeFrontEnd::send_append(uint32_t rid, const protocol::ClientMessage& m) {
  uint64_t turn = 0;
  if (const auto* t = std::get_if<protocol::AppendText>(&m)) {
    turn = pipeline_->send(t->text, {}, false, 0);
  } else {
    const auto& ids = std::get<protocol::AppendIds>(m).ids;
    turn = pipeline_->send("", std::vector<int32_t>(ids.begin(), ids.end()), false, 0);
  }
  turns_[turn] = TurnInfo{TurnKind::kAppend, rid};
}

void ServeFrontEnd::start_generation(uint32_t rid, const protocol::Generate& g) {
  // The request's own sampling unless it asks for the server's (--temperature etc.).
  SamplingParams own;
  own.temperature = g.temperature;
  own.top_k = int(std::min<uint32_t>(g.top_k, uint32_t(INT32_MAX)));  // beyond V: no cut
  own.top_p = g.top_p;
  own.seed = g.seed;
  const bool server_sampling = (g.flags & protocol::kGenDefaultSampling) != 0;
  const int64_t max = g.max_tokens != 0 ? int64_t(g.max_tokens) : default_max_tokens_;
  actors::TurnOptions turn;
  turn.sampling = server_sampling ? nullptr : &own;
  turn.end_ids = (g.flags & protocol::kGenStopAtEot) != 0 ? actors::EndIds::kStopAfter
                                                          : actors::EndIds::kIgnore;
  turn.gate_may_stop = (g.flags & protocol::kGenGated) != 0;
  turn.stop_ids.assign(g.stop_ids.begin(), g.stop_ids.end());
  gen_turn_ = pipeline_->send("", {}, true, max, std::move(turn));
  turns_[gen_turn_] = TurnInfo{TurnKind::kGenerate, rid};
  gen_rid_ = rid;
  gen_flags_ = g.flags;
  gen_sent_ = 0;
  gen_last_id_ = protocol::kNoToken;
  gen_interrupted_ = false;
  after_interrupt_ = 0;
}

void ServeFrontEnd::interrupt_generation() {
  if (!gen_interrupted_) pipeline_->interrupt();
  gen_interrupted_ = true;
}

void ServeFrontEnd::flush_queue() {
  std::vector<Queued> q;
  q.swap(queued_);
  for (const Queued& a : q) send_append(a.rid, a.message);
}

void ServeFrontEnd::finish_generation() {
  std::unique_lock lock(mu_);
  queued_.clear();
  if (gen_turn_ != 0) interrupt_generation();
  // Every request accepted before the end is answered first (DONE, APPENDED, STATS, RESET_ACK).
  cv_.wait(lock, [&] {
    return gen_turn_ == 0 && turns_.empty() && reset_rids_.empty() && stats_rids_.empty();
  });
}

void ServeFrontEnd::shutdown_ack() {
  std::lock_guard lock(mu_);
  write(protocol::ServerMessage{protocol::ShutdownAck{}}, shutdown_rid_);
  out_closed_ = true;  // SHUTDOWN_ACK is the last frame
}

protocol::Stats ServeFrontEnd::current_stats() const {
  protocol::Stats s;
  s.pos = uint64_t(pos_);
  s.kv_tokens = uint64_t(std::min<int64_t>(pos_, hello_.context_tokens));
  s.prefill_tokens = prefill_tokens_;
  s.decode_tokens = decode_tokens_;
  s.generations = generations_;
  s.prefill_tok_s = prefill_ms_ > 0 ? double(prefill_tokens_) / prefill_ms_ * 1e3 : 0.0;
  s.decode_tok_s = decode_ms_ > 0 ? double(decode_tokens_) / decode_ms_ * 1e3 : 0.0;
  s.uptime_ms = uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - start_)
                             .count());
  s.flags = gen_turn_ != 0 ? protocol::kStatsGenerating : 0;
  s.queued_appends = uint32_t(queued_.size());
  return s;
}

// ---- the io actor's side

void ServeFrontEnd::token(const actors::TokenEvent& t) {
  std::lock_guard lock(mu_);
  pos_ = std::max(pos_, t.position + 1);
  if (t.turn != gen_turn_) return;
  if (gen_interrupted_ && after_interrupt_++ >= 1) return;  // at most one TOKEN after INTERRUPT
  // TOKEN and its GATE go out in one write: one syscall, and one wake-up of the client.
  append(protocol::ServerMessage{protocol::Token{uint32_t(t.id), gen_sent_, uint64_t(t.position),
                                                 t.text}},
         gen_rid_);
  if ((gen_flags_ & protocol::kGenGateEvents) != 0 || t.decision != actors::Decision::kSpeak) {
    protocol::Gate g;
    g.decision = gate_decision(t.decision);
    g.index = gen_sent_;
    g.entropy = t.entropy;
    g.top_prob = t.top_prob;
    g.eot_prob = t.eot_prob;
    g.urgency = queued_.empty() ? 0.0f : 1.0f;  // pending input
    g.cost_ms = t.ms_per_token * float(std::max<int64_t>(t.tokens_left, 0));
    append(protocol::ServerMessage{g}, gen_rid_);
  }
  flush();
  ++gen_sent_;
  gen_last_id_ = uint32_t(t.id);
}

void ServeFrontEnd::turn_end(const actors::TurnEnd& e) {
  std::lock_guard lock(mu_);
  const int64_t before = pos_;
  pos_ = e.position;
  prefill_tokens_ += uint64_t(e.prefilled);
  decode_tokens_ += uint64_t(e.generated);
  prefill_ms_ += e.prefill_ms;
  decode_ms_ += e.decode_ms;
  const auto it = turns_.find(e.turn);
  if (it == turns_.end()) return;
  const TurnInfo info = it->second;
  turns_.erase(it);
  cv_.notify_all();  // finish_generation() waits for every turn's answer
  if (info.kind == TurnKind::kInternal) return;
  if (info.kind == TurnKind::kAppend) {
    write(protocol::ServerMessage{protocol::Appended{uint64_t(e.position),
                                                     uint32_t(std::max<int64_t>(0, e.position - before))}},
          info.rid);
    return;
  }
  protocol::Done d;
  d.reason = done_reason(e.reason);
  d.text = e.tail_text;
  d.pos = uint64_t(e.position);
  d.n_tokens = gen_sent_;
  d.last_id = gen_last_id_;
  write(protocol::ServerMessage{d}, gen_rid_);
  ++generations_;
  gen_turn_ = 0;
  reader_.generation_done();
  flush_queue();
  cv_.notify_all();
}

void ServeFrontEnd::stats(const actors::PipelineStats&) {
  std::lock_guard lock(mu_);
  if (stats_rids_.empty()) return;
  const uint32_t rid = stats_rids_.front();
  stats_rids_.pop_front();
  cv_.notify_all();
  write(protocol::ServerMessage{current_stats()}, rid);
}

void ServeFrontEnd::reset_done() {
  std::lock_guard lock(mu_);
  pos_ = 0;
  if (reset_rids_.empty()) return;
  const uint32_t rid = reset_rids_.front();
  reset_rids_.pop_front();
  cv_.notify_all();
  write(protocol::ServerMessage{protocol::ResetAck{}}, rid);
}

void ServeFrontEnd::error(const actors::ErrorEvent& e) {
  std::lock_guard lock(mu_);
  std::fprintf(stderr, "infer: --serve: %s\n", e.message.c_str());
  const uint16_t op = gen_turn_ != 0 ? uint16_t(protocol::Opcode::kGenerate) : 0;
  write(protocol::ServerMessage{protocol::ErrorFrame{protocol::WireError::kEngine, op, e.message}},
        gen_turn_ != 0 ? gen_rid_ : 0);
}

}  // namespace infer::cli
