// What the payload parsers share (protocol/parse.cpp, protocol/parse_memory.cpp,
// protocol/parse_tools.cpp): error
// builders that name the opcode, size checks and text checks (PROTOCOL.md §6.2). Internal to
// protocol/.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "base/result.h"
#include "protocol/messages.h"

namespace infer::protocol::detail {

using Bytes = std::span<const uint8_t>;

std::string name_of(uint16_t op);  // "GENERATE (0x0004)"
Error malformed(uint16_t op, const std::string& what);  // → MALFORMED
Error bad_value(uint16_t op, const std::string& what);  // → BAD_VALUE
Result<void> size_is(uint16_t op, Bytes p, size_t want);
Result<void> size_at_least(uint16_t op, Bytes p, size_t want);
// Strict UTF-8 and at most max_bytes.
Result<void> check_text(uint16_t op, const char* field, std::string_view s, size_t max_bytes);

// The episodic memory opcodes (PROTOCOL.md §4.14-§4.18).
Result<ClientMessage> parse_memory_client(uint16_t op, Bytes p);
Result<ServerMessage> parse_memory_server(uint16_t op, Bytes p);

// The tool opcodes (PROTOCOL.md §4.20-§4.28).
Result<ClientMessage> parse_tools_client(uint16_t op, Bytes p);
Result<ServerMessage> parse_tools_server(uint16_t op, Bytes p);

}  // namespace infer::protocol::detail
