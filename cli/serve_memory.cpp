// MemoryCommand -> MemoryOp, MemoryReply -> answer frame, MemoryNotice -> MEMORY_EVENT.
#include "cli/serve_memory.h"

#include <algorithm>

namespace infer::cli {
namespace {

protocol::Opcode opcode_of(actors::MemoryOpKind k) {
  switch (k) {
    case actors::MemoryOpKind::kRecall: return protocol::Opcode::kMemoryRecall;
    case actors::MemoryOpKind::kStore: return protocol::Opcode::kMemoryStore;
    case actors::MemoryOpKind::kForget: return protocol::Opcode::kMemoryForget;
    case actors::MemoryOpKind::kQuery: return protocol::Opcode::kMemoryQuery;
    case actors::MemoryOpKind::kDrain: return protocol::Opcode::kShutdown;
  }
  return protocol::Opcode::kMemoryQuery;
}

uint64_t unsigned_ms(int64_t ms) { return ms > 0 ? uint64_t(ms) : 0; }

}  // namespace

actors::MemoryOp memory_op(const protocol::MemoryCommand& c) {
  actors::MemoryOp op;
  op.ticket = c.ticket;
  switch (c.kind) {
    case protocol::MemoryCommand::kRecall: op.kind = actors::MemoryOpKind::kRecall; break;
    case protocol::MemoryCommand::kStore: op.kind = actors::MemoryOpKind::kStore; break;
    case protocol::MemoryCommand::kForget: op.kind = actors::MemoryOpKind::kForget; break;
    case protocol::MemoryCommand::kQuery: op.kind = actors::MemoryOpKind::kQuery; break;
    case protocol::MemoryCommand::kDrain: op.kind = actors::MemoryOpKind::kDrain; break;
  }
  op.text = c.text;
  op.episode_id = c.episode_id;
  op.first = c.first;
  op.max_count = c.max_count;
  return op;
}

protocol::EngineMemoryReply memory_answer(const actors::MemoryReply& r) {
  using namespace protocol;
  EngineMemoryReply out;
  out.ticket = r.ticket;
  out.pos = r.position;
  out.prefilled = uint64_t(std::max<int64_t>(0, r.prefilled));
  out.prefill_ms = r.prefill_ms;
  if (!r.ok) {
    const WireError code =
        r.code == ErrorCode::kNotFound ? WireError::kBadValue : WireError::kEngine;
    out.answer = ErrorFrame{code, uint16_t(opcode_of(r.kind)), r.error};
    return out;
  }
  switch (r.kind) {
    case actors::MemoryOpKind::kRecall: {
      MemoryRecalled m;
      for (const actors::MemoryEntry& e : r.entries) {
        const int64_t age_ms = std::max<int64_t>(0, r.now_ms - e.written_ms);
        m.episodes.push_back({e.id, e.n_tokens, float(e.score), e.association, e.strength,
                              uint32_t(std::min<int64_t>(age_ms / 1000, UINT32_MAX))});
      }
      out.answer = std::move(m);
      break;
    }
    case actors::MemoryOpKind::kStore: {
      MemoryStored m;
      for (const actors::MemoryEntry& e : r.entries) {
        m.episodes.push_back({e.id, uint64_t(e.pos0), e.n_tokens});
      }
      out.answer = std::move(m);
      break;
    }
    case actors::MemoryOpKind::kForget:
      out.answer = MemoryForgotten{r.entries.empty() ? 0 : r.entries.front().id};
      break;
    case actors::MemoryOpKind::kQuery: {
      MemoryList m;
      m.total = uint32_t(std::min<uint64_t>(r.total, UINT32_MAX));
      for (const actors::MemoryEntry& e : r.entries) {
        m.episodes.push_back({e.id, uint64_t(e.pos0), e.n_tokens, e.strength,
                              unsigned_ms(e.written_ms), unsigned_ms(e.recalled_ms), e.preview});
      }
      out.answer = std::move(m);
      break;
    }
    case actors::MemoryOpKind::kDrain: break;  // answered silently (SHUTDOWN's wait)
  }
  return out;
}

protocol::EngineMemoryEvent memory_event(const actors::MemoryNotice& n) {
  protocol::EngineMemoryEvent out;
  protocol::MemoryEvent& e = out.event;
  e.kind = protocol::MemoryEventKind(uint32_t(n.kind));
  e.episode_id = n.entry.id;
  e.pos0 = uint64_t(std::max<int64_t>(0, n.entry.pos0));
  e.n_tokens = n.entry.n_tokens;
  e.score = float(n.entry.score);
  e.association = n.entry.association;
  e.strength = n.entry.strength;
  out.cause_ticket = n.cause_ticket;
  out.cause_turn = n.cause_turn;
  return out;
}

}  // namespace infer::cli
