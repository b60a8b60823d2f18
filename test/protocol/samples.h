// One sample message per v1 opcode (tool frames: one per TOOL_EVENT kind), both directions, with fields that exercise every byte of
// their encodings (multi-byte UTF-8, ids above 2^16, negative zero and subnormal floats).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "protocol/messages.h"

namespace infer::protocol::test {

std::vector<std::pair<ClientMessage, uint32_t>> client_samples();  // (message, request id)
std::vector<std::pair<ServerMessage, uint32_t>> server_samples();

}  // namespace infer::protocol::test
