// Payload writers, one per opcode, in the field order of PROTOCOL.md §4.
#include "protocol/encode.h"

#include "base/check.h"
#include "protocol/bytes.h"
#include "protocol/frame.h"

namespace infer::protocol {
namespace {

void put_ids(std::vector<uint8_t>& out, const std::vector<uint32_t>& ids) {
  for (uint32_t id : ids) put_u32(out, id);
}

// ---- client → server
void payload(const Hello& m, std::vector<uint8_t>& out) {
  put_u32(out, m.version);
  put_bytes(out, m.client_name);
}
void payload(const AppendText& m, std::vector<uint8_t>& out) { put_bytes(out, m.text); }
void payload(const AppendIds& m, std::vector<uint8_t>& out) { put_ids(out, m.ids); }
void payload(const Generate& m, std::vector<uint8_t>& out) {
  put_u32(out, m.max_tokens);
  put_u32(out, m.flags);
  put_u64(out, m.seed);
  put_f32(out, m.temperature);
  put_f32(out, m.top_p);
  put_u32(out, m.top_k);
  put_u32(out, static_cast<uint32_t>(m.stop_ids.size()));
  put_ids(out, m.stop_ids);
}
void payload(const Interrupt&, std::vector<uint8_t>&) {}
void payload(const StatsRequest&, std::vector<uint8_t>&) {}
void payload(const TraceMark& m, std::vector<uint8_t>& out) { put_bytes(out, m.label); }
void payload(const Reset&, std::vector<uint8_t>&) {}
void payload(const Shutdown&, std::vector<uint8_t>&) {}
void payload(const MemoryRecall& m, std::vector<uint8_t>& out) { put_bytes(out, m.text); }
void payload(const MemoryStore&, std::vector<uint8_t>&) {}
void payload(const MemoryForget& m, std::vector<uint8_t>& out) { put_u64(out, m.episode_id); }
void payload(const MemoryQuery& m, std::vector<uint8_t>& out) {
  put_u32(out, m.first);
  put_u32(out, m.max_count);
}
void payload(const MemoryWatch& m, std::vector<uint8_t>& out) { put_u32(out, m.on); }

// ---- server → client
void payload(const ServerHello& m, std::vector<uint8_t>& out) {
  put_u32(out, m.version);
  put_u32(out, m.vocab_size);
  put_u32(out, m.max_payload_bytes);
  put_u32(out, m.max_generate_tokens);
  put_u32(out, m.context_tokens);
  put_u32(out, static_cast<uint32_t>(m.end_ids.size()));
  put_ids(out, m.end_ids);
  put_bytes(out, m.model_name);
}
void payload(const Token& m, std::vector<uint8_t>& out) {
  put_u32(out, m.id);
  put_u32(out, m.index);
  put_u64(out, m.pos);
  put_bytes(out, m.text);
}
void payload(const Gate& m, std::vector<uint8_t>& out) {
  put_u32(out, static_cast<uint32_t>(m.decision));
  put_u32(out, m.index);
  put_f32(out, m.entropy);
  put_f32(out, m.top_prob);
  put_f32(out, m.eot_prob);
  put_f32(out, m.urgency);
  put_f32(out, m.cost_ms);
}
void payload(const Done& m, std::vector<uint8_t>& out) {
  put_u32(out, static_cast<uint32_t>(m.reason));
  put_u32(out, m.n_tokens);
  put_u64(out, m.pos);
  put_u32(out, m.last_id);
  put_bytes(out, m.text);
}
void payload(const Stats& m, std::vector<uint8_t>& out) {
  put_u64(out, m.pos);
  put_u64(out, m.kv_tokens);
  put_u64(out, m.prefill_tokens);
  put_u64(out, m.decode_tokens);
  put_u64(out, m.generations);
  put_f64(out, m.prefill_tok_s);
  put_f64(out, m.decode_tok_s);
  put_u64(out, m.uptime_ms);
  put_u32(out, m.flags);
  put_u32(out, m.queued_appends);
}
void payload(const ErrorFrame& m, std::vector<uint8_t>& out) {
  put_u16(out, static_cast<uint16_t>(m.code));
  put_u16(out, m.opcode);
  // Messages may quote client input: keep the valid prefix, then cut to the limit.
  std::string_view msg = m.message;
  msg = msg.substr(0, utf8_valid_prefix(msg));
  put_bytes(out, msg.substr(0, utf8_cut(msg, kMaxMessageBytes)));
}
void payload(const TraceMarkAck& m, std::vector<uint8_t>& out) {
  put_u64(out, m.server_time_ns);
  put_bytes(out, m.label);
}
void payload(const ShutdownAck&, std::vector<uint8_t>&) {}
void payload(const Appended& m, std::vector<uint8_t>& out) {
  put_u64(out, m.pos);
  put_u32(out, m.n_tokens);
}
void payload(const ResetAck&, std::vector<uint8_t>&) {}
void payload(const MemoryRecalled& m, std::vector<uint8_t>& out) {
  put_u32(out, static_cast<uint32_t>(m.episodes.size()));
  for (const RecalledEpisode& e : m.episodes) {
    put_u64(out, e.episode_id);
    put_u32(out, e.n_tokens);
    put_f32(out, e.score);
    put_f32(out, e.association);
    put_f32(out, e.strength);
    put_u32(out, e.age_s);
  }
}
void payload(const MemoryStored& m, std::vector<uint8_t>& out) {
  put_u32(out, static_cast<uint32_t>(m.episodes.size()));
  for (const StoredEpisode& e : m.episodes) {
    put_u64(out, e.episode_id);
    put_u64(out, e.pos0);
    put_u32(out, e.n_tokens);
  }
}
void payload(const MemoryForgotten& m, std::vector<uint8_t>& out) { put_u64(out, m.episode_id); }
void payload(const MemoryList& m, std::vector<uint8_t>& out) {
  INFER_CHECK(m.episodes.size() <= kMaxListEpisodes, "MEMORY_LIST of %zu episodes",
              m.episodes.size());
  put_u32(out, m.total);
  put_u32(out, static_cast<uint32_t>(m.episodes.size()));
  for (const ListedEpisode& e : m.episodes) {
    put_u64(out, e.episode_id);
    put_u64(out, e.pos0);
    put_u32(out, e.n_tokens);
    put_f32(out, e.strength);
    put_u64(out, e.written_ms);
    put_u64(out, e.recalled_ms);
    // Previews come from the store (cut there at a character boundary); cut again, never torn.
    std::string_view preview = e.preview;
    preview = preview.substr(0, utf8_valid_prefix(preview));
    preview = preview.substr(0, utf8_cut(preview, kMaxPreviewBytes));
    put_u32(out, static_cast<uint32_t>(preview.size()));
    put_bytes(out, preview);
  }
}
void payload(const MemoryEvent& m, std::vector<uint8_t>& out) {
  put_u32(out, static_cast<uint32_t>(m.kind));
  put_u64(out, m.episode_id);
  put_u64(out, m.pos0);
  put_u32(out, m.n_tokens);
  put_f32(out, m.score);
  put_f32(out, m.association);
  put_f32(out, m.strength);
}
void payload(const MemoryWatchAck&, std::vector<uint8_t>&) {}

// ---- tools, client → server (§4.21-§4.27)
void payload(const ToolDeclare& m, std::vector<uint8_t>& out) { put_bytes(out, m.json); }
void payload(const ToolResult& m, std::vector<uint8_t>& out) {
  put_u32(out, m.call_id);
  put_u32(out, static_cast<uint32_t>(m.status));
  put_bytes(out, m.text);
}
void payload(const ToolEvents& m, std::vector<uint8_t>& out) { put_u32(out, m.mask); }
void payload(const PtyOpen& m, std::vector<uint8_t>& out) {
  put_u16(out, m.rows);
  put_u16(out, m.cols);
  put_u32(out, m.flags);
  put_u32(out, static_cast<uint32_t>(m.cwd.size()));
  put_bytes(out, m.cwd);
  for (size_t i = 0; i < m.argv.size(); ++i) {
    if (i > 0) out.push_back(0);  // NUL between arguments, none after the last
    put_bytes(out, m.argv[i]);
  }
}
void payload(const PtyWrite& m, std::vector<uint8_t>& out) {
  put_u32(out, m.pty_id);
  put_u32(out, static_cast<uint32_t>(m.mode));
  put_bytes(out, m.data);
}
void payload(const PtyResize& m, std::vector<uint8_t>& out) {
  put_u32(out, m.pty_id);
  put_u16(out, m.rows);
  put_u16(out, m.cols);
}
void payload(const PtyClose& m, std::vector<uint8_t>& out) { put_u32(out, m.pty_id); }
void payload(const PtyRead& m, std::vector<uint8_t>& out) {
  put_u32(out, m.pty_id);
  put_u32(out, static_cast<uint32_t>(m.view));
  put_u64(out, m.from);
  put_u32(out, m.max_bytes);
}
void payload(const InterruptAction& m, std::vector<uint8_t>& out) {
  put_u32(out, m.interrupt_id);
  put_u32(out, static_cast<uint32_t>(m.action));
  put_u32(out, m.snooze_ms);
}
void payload(const InterruptRaise& m, std::vector<uint8_t>& out) {
  put_u32(out, m.channel);
  put_bytes(out, m.text);
}

// ---- tools, server → client (§4.21-§4.28)
void payload(const ToolAck&, std::vector<uint8_t>&) {}
void payload(const ToolDeclared& m, std::vector<uint8_t>& out) { put_u32(out, m.n_tools); }
void payload(const ToolCall& m, std::vector<uint8_t>& out) {
  put_u32(out, m.call_id);
  put_u32(out, static_cast<uint32_t>(m.name.size()));
  put_bytes(out, m.name);
  put_bytes(out, m.arguments);
}
void payload(const PtyOpened& m, std::vector<uint8_t>& out) {
  put_u32(out, m.pty_id);
  put_u32(out, m.pid);
}
void payload(const PtyData& m, std::vector<uint8_t>& out) {
  put_u32(out, m.pty_id);
  put_u32(out, static_cast<uint32_t>(m.view));
  put_u64(out, m.from);
  put_u64(out, m.next);
  put_u64(out, m.end);
  put_u64(out, m.skipped);
  put_u32(out, static_cast<uint32_t>(m.state));
  put_u32(out, m.code);
  put_u32(out, static_cast<uint32_t>(m.partial_line.size()));
  put_bytes(out, m.partial_line);
  put_bytes(out, m.data);
}
void payload(const InterruptRaised& m, std::vector<uint8_t>& out) { put_u32(out, m.interrupt_id); }
void event_payload(const ToolRanEvent& e, std::vector<uint8_t>& out) {
  put_u32(out, e.call_id);
  put_u32(out, static_cast<uint32_t>(e.status));
  put_u32(out, e.elapsed_ms);
  put_u64(out, e.pos);
  put_u32(out, e.n_tokens);
  put_u32(out, e.client);
  put_bytes(out, e.name);
}
void event_payload(const PtyOutputEvent& e, std::vector<uint8_t>& out) {
  put_u32(out, e.pty_id);
  put_u64(out, e.raw_from);
  put_u64(out, e.text_from);
  put_u32(out, static_cast<uint32_t>(e.raw.size()));
  put_bytes(out, e.raw);
  put_bytes(out, e.text);
}
void event_payload(const PtyStateEvent& e, std::vector<uint8_t>& out) {
  put_u32(out, e.pty_id);
  put_u32(out, static_cast<uint32_t>(e.state));
  put_u32(out, e.code);
}
void event_payload(const InterruptEvent& e, std::vector<uint8_t>& out) {
  put_u32(out, e.interrupt_id);
  put_u32(out, static_cast<uint32_t>(e.state));
  put_u32(out, static_cast<uint32_t>(e.source));
  put_u32(out, e.source_id);
  put_u32(out, e.snooze_ms);
  put_u64(out, e.bytes);
  put_u64(out, e.pos);
  put_u32(out, e.n_tokens);
}
void payload(const ToolEvent& m, std::vector<uint8_t>& out) {
  put_u32(out, static_cast<uint32_t>(m.kind()));
  std::visit([&](const auto& e) { event_payload(e, out); }, m.event);
}

template <class Variant>
void encode_frame(const Variant& m, uint32_t request_id, std::vector<uint8_t>& out) {
  const size_t start = out.size();
  std::visit(
      [&](const auto& msg) {
        put_header(out, FrameHeader{0, static_cast<uint16_t>(msg.kOpcode), 0, request_id});
        payload(msg, out);
      },
      m);
  const size_t payload_bytes = out.size() - start - kHeaderBytes;
  INFER_CHECK(payload_bytes <= kMaxPayloadBytes, "%s payload of %zu bytes over the %u limit",
              opcode_name(static_cast<uint16_t>(opcode_of(m))), payload_bytes, kMaxPayloadBytes);
  // Patch the length now that the payload is written.
  for (int i = 0; i < 4; ++i) out[start + i] = static_cast<uint8_t>(payload_bytes >> (8 * i));
}

template <class Variant>
std::vector<uint8_t> payload_only(const Variant& m) {
  std::vector<uint8_t> out;
  // Also spares GCC 12's -O3 a bogus -Wstringop-overflow on appends to an empty vector.
  out.reserve(64);
  std::visit([&](const auto& msg) { payload(msg, out); }, m);
  return out;
}

}  // namespace

void encode(const ClientMessage& m, uint32_t request_id, std::vector<uint8_t>& out) {
  encode_frame(m, request_id, out);
}
void encode(const ServerMessage& m, uint32_t request_id, std::vector<uint8_t>& out) {
  encode_frame(m, request_id, out);
}
std::vector<uint8_t> encode_payload(const ClientMessage& m) { return payload_only(m); }
std::vector<uint8_t> encode_payload(const ServerMessage& m) { return payload_only(m); }

std::vector<std::string_view> split_text(std::string_view text, size_t max_bytes) {
  INFER_CHECK(max_bytes >= 4, "split_text needs room for one character, got %zu", max_bytes);
  std::vector<std::string_view> pieces;
  while (!text.empty()) {
    const size_t n = utf8_cut(text, max_bytes);
    pieces.push_back(text.substr(0, n));
    text.remove_prefix(n);
  }
  return pieces;
}

}  // namespace infer::protocol
