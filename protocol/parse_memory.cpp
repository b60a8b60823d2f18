// Parsers of the episodic memory frames (PROTOCOL.md §4.14-§4.18), sizes checked before reading.
#include <string>

#include "protocol/bytes.h"
#include "protocol/parse_detail.h"

namespace infer::protocol::detail {
namespace {

// A u32 count n of records of record_bytes each after `fixed` bytes: the payload must be exactly
// that long (the count is checked against the payload before anything is allocated).
Result<uint32_t> record_count(uint16_t op, Bytes p, size_t fixed, size_t record_bytes) {
  INFER_TRY_VOID(size_at_least(op, p, fixed));
  const uint32_t n = get_u32(p.data() + fixed - 4);
  if ((p.size() - fixed) / record_bytes < n) {
    return malformed(op, std::to_string(n) + " entries do not fit a payload of " +
                             std::to_string(p.size()) + " bytes");
  }
  INFER_TRY_VOID(size_is(op, p, fixed + record_bytes * size_t{n}));
  return n;
}

Result<ServerMessage> recalled(uint16_t op, Bytes p) {
  INFER_TRY(const uint32_t n, record_count(op, p, 4, 28));
  ByteReader r(p);
  r.u32();
  MemoryRecalled m;
  m.episodes.resize(n);
  for (RecalledEpisode& e : m.episodes) {
    e.episode_id = r.u64();
    e.n_tokens = r.u32();
    e.score = r.f32();
    e.association = r.f32();
    e.strength = r.f32();
    e.age_s = r.u32();
  }
  return ServerMessage{std::move(m)};
}

Result<ServerMessage> stored(uint16_t op, Bytes p) {
  INFER_TRY(const uint32_t n, record_count(op, p, 4, 20));
  ByteReader r(p);
  r.u32();
  MemoryStored m;
  m.episodes.resize(n);
  for (StoredEpisode& e : m.episodes) {
    e.episode_id = r.u64();
    e.pos0 = r.u64();
    e.n_tokens = r.u32();
  }
  return ServerMessage{std::move(m)};
}

Result<ServerMessage> list(uint16_t op, Bytes p) {
  constexpr size_t kEntry = 44;
  INFER_TRY_VOID(size_at_least(op, p, 8));
  ByteReader r(p);
  MemoryList m;
  m.total = r.u32();
  const uint32_t n = r.u32();
  if (n > kMaxListEpisodes || (p.size() - 8) / kEntry < n) {
    return malformed(op, std::to_string(n) + " entries do not fit a payload of " +
                             std::to_string(p.size()) + " bytes");
  }
  m.episodes.resize(n);
  for (ListedEpisode& e : m.episodes) {
    if (r.remaining() < kEntry) {
      return malformed(op, "entry " + std::to_string(&e - m.episodes.data()) + " is cut short");
    }
    e.episode_id = r.u64();
    e.pos0 = r.u64();
    e.n_tokens = r.u32();
    e.strength = r.f32();
    e.written_ms = r.u64();
    e.recalled_ms = r.u64();
    const uint32_t preview = r.u32();
    if (preview > kMaxPreviewBytes || preview > r.remaining()) {
      return malformed(op, "a preview of " + std::to_string(preview) + " bytes (the limit is " +
                               std::to_string(kMaxPreviewBytes) + ", " +
                               std::to_string(r.remaining()) + " bytes left)");
    }
    e.preview = std::string(r.text(preview));
    INFER_TRY_VOID(check_text(op, "preview", e.preview, kMaxPreviewBytes));
  }
  if (r.remaining() != 0) {
    return malformed(op, std::to_string(r.remaining()) + " bytes after the last entry");
  }
  return ServerMessage{std::move(m)};
}

Result<ServerMessage> event(uint16_t op, Bytes p) {
  INFER_TRY_VOID(size_is(op, p, 36));
  ByteReader r(p);
  MemoryEvent m;
  const uint32_t kind = r.u32();
  if (kind == 0 || kind > kMaxMemoryEventKind) return malformed(op, "kind " + std::to_string(kind));
  m.kind = static_cast<MemoryEventKind>(kind);
  m.episode_id = r.u64();
  m.pos0 = r.u64();
  m.n_tokens = r.u32();
  m.score = r.f32();
  m.association = r.f32();
  m.strength = r.f32();
  return ServerMessage{std::move(m)};
}

}  // namespace

Result<ClientMessage> parse_memory_client(uint16_t op, Bytes p) {
  switch (static_cast<Opcode>(op)) {
    case Opcode::kMemoryRecall: {
      MemoryRecall m;
      m.text = std::string(ByteReader(p).rest());
      INFER_TRY_VOID(check_text(op, "query", m.text, kMaxPayloadBytes));
      return ClientMessage{std::move(m)};
    }
    case Opcode::kMemoryStore:
      INFER_TRY_VOID(size_is(op, p, 0));
      return ClientMessage{MemoryStore{}};
    case Opcode::kMemoryForget: {
      INFER_TRY_VOID(size_is(op, p, 8));
      return ClientMessage{MemoryForget{ByteReader(p).u64()}};
    }
    case Opcode::kMemoryQuery: {
      INFER_TRY_VOID(size_is(op, p, 8));
      ByteReader r(p);
      MemoryQuery m;
      m.first = r.u32();
      m.max_count = r.u32();
      if (m.max_count > kMaxListEpisodes) {
        return bad_value(op, "max_count " + std::to_string(m.max_count) + " is above " +
                                 std::to_string(kMaxListEpisodes));
      }
      return ClientMessage{m};
    }
    case Opcode::kMemoryWatch: {
      INFER_TRY_VOID(size_is(op, p, 4));
      const uint32_t on = ByteReader(p).u32();
      if (on > 1) return bad_value(op, "on is " + std::to_string(on) + ", not 0 or 1");
      return ClientMessage{MemoryWatch{on}};
    }
    default: return make_error(ErrorCode::kInternal, name_of(op) + ": not a memory request");
  }
}

Result<ServerMessage> parse_memory_server(uint16_t op, Bytes p) {
  switch (static_cast<Opcode>(op)) {
    case Opcode::kMemoryRecalled: return recalled(op, p);
    case Opcode::kMemoryStored: return stored(op, p);
    case Opcode::kMemoryForgotten:
      INFER_TRY_VOID(size_is(op, p, 8));
      return ServerMessage{MemoryForgotten{ByteReader(p).u64()}};
    case Opcode::kMemoryList: return list(op, p);
    case Opcode::kMemoryEvent: return event(op, p);
    case Opcode::kMemoryWatchAck:
      INFER_TRY_VOID(size_is(op, p, 0));
      return ServerMessage{MemoryWatchAck{}};
    default: return make_error(ErrorCode::kInternal, name_of(op) + ": not a memory answer");
  }
}

}  // namespace infer::protocol::detail
