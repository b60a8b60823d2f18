// What the server accepts when (PROTOCOL.md §6.3): pure logic over a small state, no I/O. The
// serve front end calls check() on every parsed client message, answers a rejection with an
// ERROR frame, and calls apply() on what it accepted and generation_done() when it sends DONE.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "protocol/messages.h"

namespace infer::protocol {

struct SessionLimits {
  uint32_t vocab_size = 0;           // ids must be < this (SERVER_HELLO.vocab_size)
  uint32_t max_generate_tokens = 0;  // GENERATE.max_tokens must be <= this
  bool memory = false;  // episodic memory is served (--memory); else its frames are NOT_AVAILABLE
  bool tools = false;   // tool frames are served (--tools); else they are NOT_AVAILABLE
};

struct SessionState {
  bool handshaken = false;   // HELLO accepted
  bool generating = false;   // GENERATE accepted, DONE not yet sent
  bool has_context = false;  // tokens appended since start or RESET
  bool preamble = false;     // every context opens with the server's own tokens (--system)
  bool closed = false;       // SHUTDOWN accepted: nothing more is read
};

struct Rejection {
  WireError code = WireError::kOutOfOrder;
  std::string message;
  bool ends_session = false;  // VERSION_MISMATCH: ERROR, SHUTDOWN_ACK, then exit
};

// The values of `m` against the server's limits, whatever the state: GENERATE max_tokens
// (BAD_VALUE), token and stop ids (ID_OUT_OF_RANGE). nullopt when within them.
std::optional<Rejection> check_limits(const SessionLimits& limits, const ClientMessage& m);
// nullopt when `m` is acceptable in `s` (its limits checked already); else the ERROR frame to
// send (the message is dropped).
std::optional<Rejection> check(const SessionState& s, const ClientMessage& m);
// The state after the server accepted `m` (check() returned nullopt).
void apply(SessionState& s, const ClientMessage& m);
// The server sent DONE for the running generation.
inline void generation_done(SessionState& s) { s.generating = false; }

}  // namespace infer::protocol
