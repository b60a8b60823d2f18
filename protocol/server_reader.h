// The server's read side in one place: bytes in → accepted messages or rejections (each to be
// answered with an ERROR frame), through FrameDecoder, the parsers and the session rules.
// PROTOCOL.md §6: every error leaves the stream in step, so reading goes on after it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "protocol/frame.h"
#include "protocol/messages.h"
#include "protocol/session_rules.h"

namespace infer::protocol {

struct Accepted {
  uint32_t request_id = 0;
  ClientMessage message;
};

struct Rejected {
  uint32_t request_id = 0;  // of the offending frame
  uint16_t opcode = 0;      // of the offending frame
  WireError code = WireError::kMalformed;
  std::string message;
  bool ends_session = false;
  ErrorFrame error_frame() const { return ErrorFrame{code, opcode, message}; }
};

using ReaderEvent = std::variant<Accepted, Rejected>;

class ServerReader {
 public:
  explicit ServerReader(SessionLimits limits) : limits_(limits) {}

  // Appends an event per frame completed by `bytes`. After SHUTDOWN or a rejection that ends the
  // session, the rest is ignored (closed() is true).
  void feed(std::span<const uint8_t> bytes, std::vector<ReaderEvent>& out);
  // End of input: a TRUNCATED rejection when it ended inside a frame (EOF shuts down cleanly).
  std::optional<Rejected> finish() const;

  void generation_done() { protocol::generation_done(state_); }
  // Episodic memory is served: its frames are parsed rather than answered NOT_AVAILABLE.
  void set_memory(bool on) { limits_.memory = on; }
  // Tool frames are served: they are parsed rather than answered NOT_AVAILABLE.
  void set_tools(bool on) { limits_.tools = on; }
  // An append was refused whole and left the context empty after all.
  void set_has_context(bool has) { state_.has_context = has; }
  // Every context opens with the server's own tokens: never empty, a RESET included.
  void set_preamble(bool has) {
    state_.preamble = has;
    state_.has_context |= has;
  }
  const SessionState& state() const { return state_; }
  bool closed() const { return state_.closed; }

 private:
  // Why a client frame of opcode `op` is NOT_AVAILABLE before its payload is read (its range
  // is not served), as the tail of the message; nullptr when it is served.
  const char* switched_off(uint16_t op) const;

  SessionLimits limits_;
  SessionState state_;
  FrameDecoder decoder_;
};

}  // namespace infer::protocol
