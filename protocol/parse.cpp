// Payload parsers, one per opcode, checking sizes before reading (PROTOCOL.md §4, §6.2).
#include "protocol/parse.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "protocol/bytes.h"
#include "protocol/parse_detail.h"

namespace infer::protocol {
namespace detail {

std::string name_of(uint16_t op) {
  const char* n = opcode_name(op);
  char hex[16];
  std::snprintf(hex, sizeof hex, "0x%04X", op);
  return n ? std::string(n) + " (" + hex + ")" : std::string("opcode ") + hex;
}

Error malformed(uint16_t op, const std::string& what) {
  return make_error(ErrorCode::kParse, name_of(op) + ": " + what);
}
Error bad_value(uint16_t op, const std::string& what) {
  return make_error(ErrorCode::kInvalidArgument, name_of(op) + ": " + what);
}

Result<void> size_is(uint16_t op, Bytes p, size_t want) {
  if (p.size() == want) return Ok{};
  return malformed(op, "payload is " + std::to_string(p.size()) + " bytes, expected " +
                           std::to_string(want));
}
Result<void> size_at_least(uint16_t op, Bytes p, size_t want) {
  if (p.size() >= want) return Ok{};
  return malformed(op, "payload is " + std::to_string(p.size()) + " bytes, expected at least " +
                           std::to_string(want));
}

// Text fields: strict UTF-8 and, where given, a byte limit.
Result<void> check_text(uint16_t op, const char* field, std::string_view s, size_t max_bytes) {
  if (s.size() > max_bytes) {
    return malformed(op, std::string(field) + " is " + std::to_string(s.size()) +
                             " bytes, the limit is " + std::to_string(max_bytes));
  }
  const size_t bad = utf8_valid_prefix(s);
  if (bad != s.size()) {
    return malformed(op, std::string(field) + " is not valid UTF-8 (byte " + std::to_string(bad) +
                             " of " + std::to_string(s.size()) + ")");
  }
  return Ok{};
}

}  // namespace detail

namespace {

using namespace detail;

// n u32 ids; the caller has checked that the payload holds them.
std::vector<uint32_t> read_ids(ByteReader& r, uint32_t n) {
  std::vector<uint32_t> ids(n);
  for (auto& id : ids) id = r.u32();
  return ids;
}

// ---- client → server

Result<ClientMessage> hello(uint16_t op, Bytes p) {
  INFER_TRY_VOID(size_at_least(op, p, 4));
  ByteReader r(p);
  Hello m;
  m.version = r.u32();
  m.client_name = std::string(r.rest());
  INFER_TRY_VOID(check_text(op, "client name", m.client_name, kMaxLabelBytes));
  return ClientMessage{std::move(m)};
}

Result<ClientMessage> append_text(uint16_t op, Bytes p) {
  AppendText m;
  m.text = std::string(ByteReader(p).rest());
  INFER_TRY_VOID(check_text(op, "text", m.text, kMaxPayloadBytes));
  return ClientMessage{std::move(m)};
}

Result<ClientMessage> append_ids(uint16_t op, Bytes p) {
  if (p.size() % 4 != 0) {
    return malformed(op, "payload is " + std::to_string(p.size()) +
                             " bytes, not a whole number of u32 ids");
  }
  ByteReader r(p);
  return ClientMessage{AppendIds{read_ids(r, static_cast<uint32_t>(p.size() / 4))}};
}

Result<ClientMessage> generate(uint16_t op, Bytes p) {
  constexpr size_t kFixed = 32;
  INFER_TRY_VOID(size_at_least(op, p, kFixed));
  ByteReader r(p);
  Generate m;
  m.max_tokens = r.u32();
  m.flags = r.u32();
  m.seed = r.u64();
  m.temperature = r.f32();
  m.top_p = r.f32();
  m.top_k = r.u32();
  const uint32_t n_stop = r.u32();
  if (n_stop > kMaxStopIds) {
    return malformed(op, std::to_string(n_stop) + " stop ids, the limit is " +
                             std::to_string(kMaxStopIds));
  }
  INFER_TRY_VOID(size_is(op, p, kFixed + 4 * size_t{n_stop}));
  m.stop_ids = read_ids(r, n_stop);
  if (m.flags & ~kGenKnownFlags) {
    return malformed(op, "reserved flag bits set: flags = " + std::to_string(m.flags));
  }
  // With DEFAULT_SAMPLING the four sampling fields are ignored, so not checked.
  if (!(m.flags & kGenDefaultSampling)) {
    if (!std::isfinite(m.temperature) || m.temperature < 0.0f) {
      return bad_value(op, "temperature " + std::to_string(m.temperature) +
                               " is not a finite number >= 0");
    }
    if (!(m.top_p > 0.0f && m.top_p <= 1.0f)) {
      return bad_value(op, "top_p " + std::to_string(m.top_p) + " is not in (0, 1]");
    }
  }
  return ClientMessage{std::move(m)};
}

template <class M>
Result<ClientMessage> empty(uint16_t op, Bytes p) {
  INFER_TRY_VOID(size_is(op, p, 0));
  return ClientMessage{M{}};
}

Result<ClientMessage> trace_mark(uint16_t op, Bytes p) {
  TraceMark m;
  m.label = std::string(ByteReader(p).rest());
  INFER_TRY_VOID(check_text(op, "label", m.label, kMaxLabelBytes));
  return ClientMessage{std::move(m)};
}

// ---- server → client

Result<ServerMessage> server_hello(uint16_t op, Bytes p) {
  constexpr size_t kFixed = 24;
  INFER_TRY_VOID(size_at_least(op, p, kFixed));
  ByteReader r(p);
  ServerHello m;
  m.version = r.u32();
  m.vocab_size = r.u32();
  m.max_payload_bytes = r.u32();
  m.max_generate_tokens = r.u32();
  m.context_tokens = r.u32();
  const uint32_t n_end = r.u32();
  if (n_end > kMaxStopIds) {
    return malformed(op, std::to_string(n_end) + " end ids, the limit is " +
                             std::to_string(kMaxStopIds));
  }
  INFER_TRY_VOID(size_at_least(op, p, kFixed + 4 * size_t{n_end}));
  m.end_ids = read_ids(r, n_end);
  m.model_name = std::string(r.rest());
  INFER_TRY_VOID(check_text(op, "model name", m.model_name, kMaxLabelBytes));
  return ServerMessage{std::move(m)};
}

Result<ServerMessage> token(uint16_t op, Bytes p) {
  INFER_TRY_VOID(size_at_least(op, p, 16));
  ByteReader r(p);
  Token m;
  m.id = r.u32();
  m.index = r.u32();
  m.pos = r.u64();
  m.text = std::string(r.rest());
  INFER_TRY_VOID(check_text(op, "text", m.text, kMaxPayloadBytes));
  return ServerMessage{std::move(m)};
}

Result<ServerMessage> gate(uint16_t op, Bytes p) {
  INFER_TRY_VOID(size_is(op, p, 28));
  ByteReader r(p);
  Gate m;
  const uint32_t decision = r.u32();
  if (decision > kMaxGateDecision) return malformed(op, "decision " + std::to_string(decision));
  m.decision = static_cast<GateDecision>(decision);
  m.index = r.u32();
  m.entropy = r.f32();
  m.top_prob = r.f32();
  m.eot_prob = r.f32();
  m.urgency = r.f32();
  m.cost_ms = r.f32();
  return ServerMessage{std::move(m)};
}

Result<ServerMessage> done(uint16_t op, Bytes p) {
  INFER_TRY_VOID(size_at_least(op, p, 20));
  ByteReader r(p);
  Done m;
  const uint32_t reason = r.u32();
  if (reason == 0 || reason > kMaxDoneReason) {
    return malformed(op, "reason " + std::to_string(reason));
  }
  m.reason = static_cast<DoneReason>(reason);
  m.n_tokens = r.u32();
  m.pos = r.u64();
  m.last_id = r.u32();
  m.text = std::string(r.rest());
  INFER_TRY_VOID(check_text(op, "text", m.text, kMaxPayloadBytes));
  return ServerMessage{std::move(m)};
}

Result<ServerMessage> stats(uint16_t op, Bytes p) {
  INFER_TRY_VOID(size_is(op, p, 72));
  ByteReader r(p);
  Stats m;
  m.pos = r.u64();
  m.kv_tokens = r.u64();
  m.prefill_tokens = r.u64();
  m.decode_tokens = r.u64();
  m.generations = r.u64();
  m.prefill_tok_s = r.f64();
  m.decode_tok_s = r.f64();
  m.uptime_ms = r.u64();
  m.flags = r.u32();
  m.queued_appends = r.u32();
  return ServerMessage{std::move(m)};
}

Result<ServerMessage> error_frame(uint16_t op, Bytes p) {
  INFER_TRY_VOID(size_at_least(op, p, 4));
  ByteReader r(p);
  ErrorFrame m;
  // Any code is accepted: a newer server may send codes this client does not know.
  m.code = static_cast<WireError>(r.u16());
  m.opcode = r.u16();
  m.message = std::string(r.rest());
  INFER_TRY_VOID(check_text(op, "message", m.message, kMaxMessageBytes));
  return ServerMessage{std::move(m)};
}

Result<ServerMessage> trace_mark_ack(uint16_t op, Bytes p) {
  INFER_TRY_VOID(size_at_least(op, p, 8));
  ByteReader r(p);
  TraceMarkAck m;
  m.server_time_ns = r.u64();
  m.label = std::string(r.rest());
  INFER_TRY_VOID(check_text(op, "label", m.label, kMaxLabelBytes));
  return ServerMessage{std::move(m)};
}

template <class M>
Result<ServerMessage> server_empty(uint16_t op, Bytes p) {
  INFER_TRY_VOID(size_is(op, p, 0));
  return ServerMessage{M{}};
}

Result<ServerMessage> appended(uint16_t op, Bytes p) {
  INFER_TRY_VOID(size_is(op, p, 12));
  ByteReader r(p);
  Appended m;
  m.pos = r.u64();
  m.n_tokens = r.u32();
  return ServerMessage{std::move(m)};
}

// Not a v1 opcode of the expected direction: which error, and why.
Error not_ours(uint16_t op, bool server_reads) {
  const char* area = is_memory_opcode(op) ? "episodic memory" : is_tools_opcode(op) ? "tools" : nullptr;
  const bool wrong_direction = is_server_opcode(op) == server_reads;
  if (area && !wrong_direction) {
    return make_error(ErrorCode::kUnsupported, name_of(op) + ": reserved for " + area +
                                                   " frames; this server does not serve it");
  }
  if (wrong_direction && opcode_name(op)) {
    return make_error(ErrorCode::kNotFound,
                      name_of(op) + ": a " + (server_reads ? "server" : "client") +
                          "-to-" + (server_reads ? "client" : "server") + " opcode, sent the other way");
  }
  return make_error(ErrorCode::kNotFound, name_of(op) + ": unknown opcode");
}

}  // namespace

Result<ClientMessage> parse_client_payload(uint16_t op, std::span<const uint8_t> p) {
  switch (static_cast<Opcode>(op)) {
    case Opcode::kHello: return hello(op, p);
    case Opcode::kAppendText: return append_text(op, p);
    case Opcode::kAppendIds: return append_ids(op, p);
    case Opcode::kGenerate: return generate(op, p);
    case Opcode::kInterrupt: return empty<Interrupt>(op, p);
    case Opcode::kStatsRequest: return empty<StatsRequest>(op, p);
    case Opcode::kTraceMark: return trace_mark(op, p);
    case Opcode::kReset: return empty<Reset>(op, p);
    case Opcode::kShutdown: return empty<Shutdown>(op, p);
    case Opcode::kMemoryRecall:
    case Opcode::kMemoryStore:
    case Opcode::kMemoryForget:
    case Opcode::kMemoryQuery:
    case Opcode::kMemoryWatch: return parse_memory_client(op, p);
    case Opcode::kToolDeclare:
    case Opcode::kToolResult:
    case Opcode::kToolEvents:
    case Opcode::kPtyOpen:
    case Opcode::kPtyWrite:
    case Opcode::kPtyResize:
    case Opcode::kPtyClose:
    case Opcode::kPtyRead:
    case Opcode::kInterruptAction:
    case Opcode::kInterruptRaise: return parse_tools_client(op, p);
    default: return not_ours(op, /*server_reads=*/true);
  }
}

Result<ServerMessage> parse_server_payload(uint16_t op, std::span<const uint8_t> p) {
  switch (static_cast<Opcode>(op)) {
    case Opcode::kServerHello: return server_hello(op, p);
    case Opcode::kToken: return token(op, p);
    case Opcode::kGate: return gate(op, p);
    case Opcode::kDone: return done(op, p);
    case Opcode::kStats: return stats(op, p);
    case Opcode::kError: return error_frame(op, p);
    case Opcode::kTraceMarkAck: return trace_mark_ack(op, p);
    case Opcode::kShutdownAck: return server_empty<ShutdownAck>(op, p);
    case Opcode::kAppended: return appended(op, p);
    case Opcode::kResetAck: return server_empty<ResetAck>(op, p);
    case Opcode::kMemoryRecalled:
    case Opcode::kMemoryStored:
    case Opcode::kMemoryForgotten:
    case Opcode::kMemoryList:
    case Opcode::kMemoryEvent:
    case Opcode::kMemoryWatchAck: return parse_memory_server(op, p);
    case Opcode::kToolAck:
    case Opcode::kToolDeclared:
    case Opcode::kToolCall:
    case Opcode::kPtyOpened:
    case Opcode::kPtyData:
    case Opcode::kToolEvent:
    case Opcode::kInterruptRaised: return parse_tools_server(op, p);
    default: return not_ours(op, /*server_reads=*/false);
  }
}

Result<void> check_header_flags(const FrameHeader& h) {
  if (h.flags == 0) return Ok{};
  return malformed(h.opcode,
                   "header flags are " + std::to_string(h.flags) + ", v1 defines none (must be 0)");
}

namespace {
template <class R, class F>
R parse_frame(const Frame& f, F&& parse_payload) {
  // The payload first (opcode, sizes, values), then the flags (PROTOCOL.md §6.2).
  auto r = parse_payload(f.header.opcode, f.payload);
  if (r.ok()) {
    if (Result<void> flags = check_header_flags(f.header); !flags) return flags.error();
  }
  return r;
}
}  // namespace

Result<ClientMessage> parse_client(const Frame& f) {
  return parse_frame<Result<ClientMessage>>(f, parse_client_payload);
}
Result<ServerMessage> parse_server(const Frame& f) {
  return parse_frame<Result<ServerMessage>>(f, parse_server_payload);
}

WireError wire_error_of(const Error& e) {
  switch (e.code) {
    case ErrorCode::kParse: return WireError::kMalformed;
    case ErrorCode::kInvalidArgument: return WireError::kBadValue;
    case ErrorCode::kNotFound: return WireError::kUnknownOpcode;
    case ErrorCode::kUnsupported: return WireError::kNotAvailable;
    default: return WireError::kEngine;
  }
}

}  // namespace infer::protocol
