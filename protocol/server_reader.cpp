// ServerReader: decoder → parser → session rules (PROTOCOL.md §6).
#include "protocol/server_reader.h"

#include "protocol/parse.h"

namespace infer::protocol {

const char* ServerReader::switched_off(uint16_t op) const {
  if (is_server_opcode(op)) return nullptr;  // the other direction: UNKNOWN_OPCODE
  if (!limits_.memory && is_memory_opcode(op)) {
    return ": episodic memory is off (start infer with --memory)";
  }
  if (!limits_.tools && is_tools_opcode(op)) return ": tools are off (start infer with --tools ROOT)";
  return nullptr;
}

void ServerReader::feed(std::span<const uint8_t> bytes, std::vector<ReaderEvent>& out) {
  while (!state_.closed) {
    auto ev = decoder_.next(bytes);
    if (!ev) return;
    if (const auto* big = std::get_if<FrameTooLarge>(&*ev)) {
      out.push_back(Rejected{big->header.request_id, big->header.opcode,
                             WireError::kFrameTooLarge, big->message()});
      continue;
    }
    const Frame& f = std::get<Frame>(*ev);
    // The opcode first (§6.2): without --memory a memory request, without --tools a tool
    // request, is NOT_AVAILABLE, whatever its payload.
    if (const char* off = switched_off(f.header.opcode)) {
      const char* name = opcode_name(f.header.opcode);
      out.push_back(Rejected{f.header.request_id, f.header.opcode, WireError::kNotAvailable,
                             std::string(name ? name : "this opcode") + off});
      continue;
    }
    // PROTOCOL.md §6.2's order: the payload (opcode, sizes, UTF-8, its values), the values
    // against the server's limits, the header flags, then the session's state (§6.3).
    auto parsed = parse_client_payload(f.header.opcode, f.payload);
    if (parsed.ok()) {
      if (auto no = check_limits(limits_, *parsed)) {
        out.push_back(Rejected{f.header.request_id, f.header.opcode, no->code,
                               std::move(no->message)});
        continue;
      }
      if (Result<void> flags = check_header_flags(f.header); !flags) parsed = flags.error();
    }
    if (!parsed.ok()) {
      out.push_back(Rejected{f.header.request_id, f.header.opcode, wire_error_of(parsed.error()),
                             parsed.error().message});
      continue;
    }
    if (auto no = check(state_, *parsed)) {
      if (no->ends_session) state_.closed = true;
      out.push_back(Rejected{f.header.request_id, f.header.opcode, no->code,
                             std::move(no->message), no->ends_session});
      continue;
    }
    apply(state_, *parsed);
    out.push_back(Accepted{f.header.request_id, std::move(parsed).value()});
  }
}

std::optional<Rejected> ServerReader::finish() const {
  if (state_.closed || decoder_.at_boundary()) return std::nullopt;
  return Rejected{0, 0, WireError::kTruncated,
                  "input ended inside a frame: " + std::to_string(decoder_.partial_bytes()) +
                      " of " + std::to_string(decoder_.partial_frame_bytes()) + " bytes"};
}

}  // namespace infer::protocol
