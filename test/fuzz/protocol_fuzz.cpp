// libFuzzer target: the --serve frame decoder, every payload parser (the tool frames' JSON
// included), the server's read side and the session's tool dispatch on arbitrary bytes. Must
// never crash, never hold a payload buffer above the decoder's limit, and every payload a parser
// accepts must re-encode to the same bytes (PROTOCOL.md §4 is one layout per opcode, so parse
// and encode are inverses on valid input).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "protocol/encode.h"
#include "protocol/frame.h"
#include "protocol/parse.h"
#include "protocol/serve_session.h"
#include "protocol/server_reader.h"

namespace {

using namespace infer::protocol;

template <class Message>
void check_round_trip(const infer::Result<Message>& parsed, std::span<const uint8_t> payload) {
  if (!parsed.ok()) {
    if (parsed.error().message.empty()) __builtin_trap();
    return;
  }
  const std::vector<uint8_t> again = encode_payload(*parsed);
  if (!std::equal(again.begin(), again.end(), payload.begin(), payload.end())) __builtin_trap();
}

void parse_both_ways(uint16_t opcode, std::span<const uint8_t> payload) {
  check_round_trip(parse_client_payload(opcode, payload), payload);
  check_round_trip(parse_server_payload(opcode, payload), payload);
}

// Answers every tool frame: PTY 1 exists, anything else is refused (both paths of the dispatch).
class AnswerAll : public ToolFrames {
 public:
  ToolReply<ToolDeclared> declare(uint32_t, const ToolDeclare& d) override {
    // What the parser accepted must read back (PROTOCOL.md §4.21).
    if (!parse_tool_declarations(d.json).ok()) __builtin_trap();
    return ToolDeclared{1};
  }
  ToolReply<ToolAck> result(uint32_t, const ToolResult&) override { return no(); }
  ToolReply<PtyOpened> pty_open(uint32_t, const PtyOpen& o) override {
    if (o.argv.empty() || o.argv[0].empty()) __builtin_trap();
    return PtyOpened{1, 2};
  }
  ToolReply<ToolAck> pty_write(uint32_t, const PtyWrite& w) override { return ack_if(w.pty_id); }
  ToolReply<ToolAck> pty_resize(uint32_t, const PtyResize& r) override { return ack_if(r.pty_id); }
  ToolReply<ToolAck> pty_close(uint32_t, const PtyClose& c) override { return ack_if(c.pty_id); }
  ToolReply<PtyData> pty_read(uint32_t, const PtyRead& r) override {
    if (r.pty_id != 1) return no();
    return PtyData{};
  }
  ToolReply<ToolAck> interrupt_action(uint32_t, const InterruptAction&) override { return no(); }
  ToolReply<InterruptRaised> interrupt_raise(uint32_t, const InterruptRaise& r) override {
    if (r.text.empty()) __builtin_trap();
    return InterruptRaised{r.channel};
  }

 private:
  static ToolRefusal no() { return ToolRefusal{WireError::kBadValue, "unknown id"}; }
  static ToolReply<ToolAck> ack_if(uint32_t id) {
    if (id == 1) return ToolAck{};
    return no();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> all(data, size);

  // 1. The input as one payload, opcode from its first two bytes (mapped onto the v1 opcodes
  //    and their neighbours so that every parser is reached often).
  if (size >= 2) {
    const uint16_t raw = static_cast<uint16_t>(data[0] | (data[1] << 8));
    const uint16_t op = static_cast<uint16_t>((raw & 0x8000) | (raw % 12));
    parse_both_ways(op, all.subspan(2));
    parse_both_ways(raw, all.subspan(2));
    // ... and onto the episodic memory opcodes (0x0100-0x0104, 0x8100-0x8105) and a neighbour,
    // and the tool opcodes (0x0200-0x0209, 0x8200-0x8206) and a neighbour.
    parse_both_ways(static_cast<uint16_t>((raw & 0x8000) | 0x0100 | (raw % 7)), all.subspan(2));
    parse_both_ways(static_cast<uint16_t>((raw & 0x8000) | 0x0200 | (raw % 11)), all.subspan(2));
  }

  // 2. The input as a byte stream, cut into chunks whose sizes come from the input itself,
  //    through a decoder with a small limit (so FRAME_TOO_LARGE and skipping are reached).
  constexpr uint32_t kSmallLimit = 256;
  FrameDecoder dec(kSmallLimit);
  size_t at = 0, k = 0;
  while (at < size) {
    const size_t n = std::min<size_t>(size - at, 1 + data[k++ % size] % 64);
    std::span<const uint8_t> chunk(data + at, n);
    at += n;
    while (auto ev = dec.next(chunk)) {
      if (const auto* f = std::get_if<Frame>(&*ev)) {
        if (f->payload.size() != f->header.payload_bytes) __builtin_trap();
        if (f->header.payload_bytes > kSmallLimit) __builtin_trap();
        check_round_trip(parse_client(*f), f->payload);
        check_round_trip(parse_server(*f), f->payload);
      } else if (std::get<FrameTooLarge>(*ev).header.payload_bytes <= kSmallLimit) {
        __builtin_trap();
      }
      if (dec.buffer_capacity() > kSmallLimit) __builtin_trap();
    }
    if (!chunk.empty()) __builtin_trap();
  }

  // 3. The server's read side with the full limit, without and with episodic memory and tools:
  //    any mix of accepted and rejected frames.
  for (const bool memory : {false, true}) {
    ServerReader reader(
        SessionLimits{/*vocab_size=*/300, /*max_generate_tokens=*/64, memory, /*tools=*/memory});
    std::vector<ReaderEvent> events;
    reader.feed(all, events);
    for (const auto& ev : events) {
      if (const auto* rej = std::get_if<Rejected>(&ev)) {
        if (rej->message.empty()) __builtin_trap();
        // Without --memory a memory request is NOT_AVAILABLE whatever its payload (only an
        // oversized one is refused from its header first, §6.1).
        if (!memory && is_memory_opcode(rej->opcode) && !is_server_opcode(rej->opcode) &&
            rej->code != WireError::kNotAvailable && rej->code != WireError::kFrameTooLarge) {
          __builtin_trap();
        }
        std::vector<uint8_t> out;
        encode(ServerMessage{rej->error_frame()}, rej->request_id, out);  // must fit a frame
        // The same for tool requests without --tools.
        if (!memory && is_tools_opcode(rej->opcode) && !is_server_opcode(rej->opcode) &&
            rej->code != WireError::kNotAvailable && rej->code != WireError::kFrameTooLarge) {
          __builtin_trap();
        }
      } else {
        const auto op = static_cast<uint16_t>(opcode_of(std::get<Accepted>(ev).message));
        if (!memory && (is_memory_opcode(op) || is_tools_opcode(op))) __builtin_trap();
      }
    }
    (void)reader.finish();
  }

  // 4. A session with tools: every frame answered or refused in order, tool frames handed to
  //    the ToolFrames; a tool call and events of each kind on the way.
  AnswerAll tools;
  ServerHello hello;
  hello.vocab_size = 300;
  hello.max_generate_tokens = 64;
  hello.context_tokens = 128;
  ServeSession session(hello, 8, [] { return int64_t{0}; });
  session.set_tools(&tools);
  SessionOutput out;
  session.feed(all, out);
  session.tool_call(EngineToolCall{1, ToolCall{1, "t", "{}"}}, out);
  session.tool_event(EngineToolEvent{ToolEvent{PtyOutputEvent{1, 0, 0, "a", "a"}}, 0, 1}, out);
  session.end_of_input(out);
  for (const Outgoing& f : out.frames) {
    std::vector<uint8_t> bytes;
    encode(f.message, f.request_id, bytes);  // every frame the session writes must encode
  }
  return 0;
}
