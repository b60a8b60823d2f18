// ServeSession's episodic memory frames (PROTOCOL.md §4.14-§4.19): requests become
// MemoryCommands whose answers keep their place among the answers; events become MEMORY_EVENT
// frames while the client watches, named by the request that caused them.
#include <algorithm>

#include "protocol/serve_session.h"

namespace infer::protocol {

void ServeSession::remember_cause(bool ticket, uint64_t number, uint32_t rid) {
  causes_.push_back(Cause{ticket, number, rid});
  if (causes_.size() > kMaxCauses) causes_.pop_front();
}

uint64_t ServeSession::command_memory(MemoryCommand c, uint32_t rid, SessionOutput& out) {
  c.ticket = next_ticket_++;
  remember_cause(true, c.ticket, rid);
  out.commands.push_back(std::move(c));
  return next_ticket_ - 1;
}

void ServeSession::send_memory(uint32_t rid, const ClientMessage& m, SessionOutput& out) {
  if (const auto* w = std::get_if<MemoryWatch>(&m)) {  // the session's own switch
    watching_ = w->on != 0;
    answer(rid, ServerMessage{MemoryWatchAck{}}, out);
    return;
  }
  MemoryCommand c;
  if (const auto* r = std::get_if<MemoryRecall>(&m)) {
    c.kind = MemoryCommand::kRecall;
    c.text = r->text;
  } else if (std::holds_alternative<MemoryStore>(m)) {
    c.kind = MemoryCommand::kStore;
  } else if (const auto* f = std::get_if<MemoryForget>(&m)) {
    c.kind = MemoryCommand::kForget;
    c.episode_id = f->episode_id;
  } else {
    const auto& q = std::get<MemoryQuery>(m);
    c.kind = MemoryCommand::kQuery;
    c.first = q.first;
    c.max_count = q.max_count;
  }
  const uint64_t ticket = command_memory(std::move(c), rid, out);
  answers_.push_back(Pending{Pending::kMemory, rid, ticket});
}

void ServeSession::memory_reply(EngineMemoryReply r, SessionOutput& out) {
  for (Pending& p : answers_) {
    if ((p.kind == Pending::kMemory || p.kind == Pending::kSilent) && p.turn == r.ticket &&
        !p.done) {
      if (r.pos >= 0) pos_ = r.pos;
      prefill_tokens_ += r.prefilled;
      prefill_ms_ += r.prefill_ms;
      p.frame = std::move(r.answer);
      p.done = true;
      break;
    }
  }
  release_answers(out);
}

void ServeSession::memory_event(const EngineMemoryEvent& e, SessionOutput& out) {
  if (!watching_) return;
  uint32_t rid = 0;
  if (e.cause_ticket != 0 || e.cause_turn != 0) {
    const bool by_ticket = e.cause_ticket != 0;
    const uint64_t n = by_ticket ? e.cause_ticket : e.cause_turn;
    const auto it = std::find_if(causes_.rbegin(), causes_.rend(), [&](const Cause& c) {
      return c.ticket == by_ticket && c.number == n;
    });
    if (it != causes_.rend()) rid = it->rid;
  }
  write(rid, ServerMessage{e.event}, out);  // not an answer: it goes out when it happens (§8)
}

}  // namespace infer::protocol
