// Payload parsers: a whole frame → the message it carries, or an Error saying what is wrong
// with it (PROTOCOL.md §4 layouts, §6.2 what is malformed). Pure: no session state here
// (protocol/session_rules.h decides what is acceptable when).
#pragma once

#include <cstdint>
#include <span>

#include "base/result.h"
#include "protocol/frame.h"
#include "protocol/messages.h"

namespace infer::protocol {

// The parsers' Error codes name the ERROR frame's code, one to one (wire_error_of):
//   kParse → MALFORMED (size, count, reserved bits, invalid UTF-8),
//   kInvalidArgument → BAD_VALUE, kNotFound → UNKNOWN_OPCODE, kUnsupported → NOT_AVAILABLE.
Result<ClientMessage> parse_client(const Frame& f);  // what the server reads
Result<ServerMessage> parse_server(const Frame& f);  // what a client reads

// Same, from an opcode and payload (header flags taken as 0).
Result<ClientMessage> parse_client_payload(uint16_t opcode, std::span<const uint8_t> payload);
Result<ServerMessage> parse_server_payload(uint16_t opcode, std::span<const uint8_t> payload);

// A frame's header flags: v1 defines none (MALFORMED otherwise).
Result<void> check_header_flags(const FrameHeader& h);

WireError wire_error_of(const Error& e);

}  // namespace infer::protocol
