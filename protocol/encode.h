// Encoder: one message → one whole frame (header + payload, PROTOCOL.md §2 and §4) appended to
// `out`. A payload over kMaxPayloadBytes is the caller's bug (split text first: split_text) and
// aborts; ERROR messages are cut to kMaxMessageBytes at a character boundary instead.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/messages.h"

namespace infer::protocol {

void encode(const ClientMessage& m, uint32_t request_id, std::vector<uint8_t>& out);
void encode(const ServerMessage& m, uint32_t request_id, std::vector<uint8_t>& out);

// Only the payload bytes (what follows the header), for tests and the fuzzer.
std::vector<uint8_t> encode_payload(const ClientMessage& m);
std::vector<uint8_t> encode_payload(const ServerMessage& m);

// Splits valid UTF-8 into pieces of at most max_bytes that each end on a character boundary,
// so a long text goes out as several APPEND_TEXT frames (PROTOCOL.md §4.2).
std::vector<std::string_view> split_text(std::string_view text, size_t max_bytes = kMaxPayloadBytes);

}  // namespace infer::protocol
