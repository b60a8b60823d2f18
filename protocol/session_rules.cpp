// Session order and value rules (PROTOCOL.md §6.3): the handshake first, one generation at a
// time, ids inside the vocabulary, requests inside the server's limits.
#include "protocol/session_rules.h"

#include <span>
#include <string>
#include <type_traits>
#include <variant>

namespace infer::protocol {
namespace {

Rejection reject(WireError code, std::string message, bool ends_session = false) {
  return Rejection{code, std::move(message), ends_session};
}

std::optional<Rejection> ids_in_range(const char* what, std::span<const uint32_t> ids,
                                      uint32_t vocab_size) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= vocab_size) {
      return reject(WireError::kIdOutOfRange,
                    std::string(what) + " id " + std::to_string(ids[i]) + " at index " +
                        std::to_string(i) + " is outside the vocabulary of " +
                        std::to_string(vocab_size) + "; nothing was taken from this frame");
    }
  }
  return std::nullopt;
}

std::optional<Rejection> check_generate(const SessionState& s) {
  if (s.generating) {
    return reject(WireError::kOutOfOrder,
                  "GENERATE while a generation runs: wait for its DONE (INTERRUPT ends it early)");
  }
  if (!s.has_context) {
    return reject(WireError::kBadValue, "GENERATE with an empty context: append text or ids first");
  }
  return std::nullopt;
}

}  // namespace

std::optional<Rejection> check_limits(const SessionLimits& limits, const ClientMessage& m) {
  if (const auto* ids = std::get_if<AppendIds>(&m)) {
    return ids_in_range("token", ids->ids, limits.vocab_size);
  }
  if (const auto* g = std::get_if<Generate>(&m)) {
    if (g->max_tokens > limits.max_generate_tokens) {
      return reject(WireError::kBadValue, "GENERATE max_tokens " + std::to_string(g->max_tokens) +
                                              " is above the server's limit of " +
                                              std::to_string(limits.max_generate_tokens));
    }
    return ids_in_range("stop", g->stop_ids, limits.vocab_size);
  }
  return std::nullopt;
}

std::optional<Rejection> check(const SessionState& s, const ClientMessage& m) {
  const char* name = opcode_name(static_cast<uint16_t>(opcode_of(m)));
  if (s.closed) return reject(WireError::kOutOfOrder, std::string(name) + " after SHUTDOWN");
  if (const auto* hello = std::get_if<Hello>(&m)) {
    if (s.handshaken) return reject(WireError::kOutOfOrder, "a second HELLO");
    if (hello->version != kProtocolVersion) {
      return reject(WireError::kVersionMismatch,
                    "client speaks protocol version " + std::to_string(hello->version) +
                        ", this server speaks version " + std::to_string(kProtocolVersion),
                    /*ends_session=*/true);
    }
    return std::nullopt;
  }
  // SHUTDOWN is accepted even before the handshake: a client can always leave cleanly.
  if (std::holds_alternative<Shutdown>(m)) return std::nullopt;
  if (!s.handshaken) {
    return reject(WireError::kOutOfOrder, std::string(name) + " before HELLO");
  }
  if (std::holds_alternative<Generate>(m)) return check_generate(s);
  // APPEND_TEXT and the memory frames (queued while generating), INTERRUPT (a no-op when idle:
  // it may race with the end of a generation), STATS_REQUEST, TRACE_MARK and RESET are
  // acceptable at any time.
  return std::nullopt;
}

void apply(SessionState& s, const ClientMessage& m) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Hello>) s.handshaken = true;
        if constexpr (std::is_same_v<T, AppendText>) s.has_context |= !x.text.empty();
        if constexpr (std::is_same_v<T, AppendIds>) s.has_context |= !x.ids.empty();
        // MEMORY_RECALL's query joins the conversation (PROTOCOL.md §4.14).
        if constexpr (std::is_same_v<T, MemoryRecall>) s.has_context |= !x.text.empty();
        if constexpr (std::is_same_v<T, Generate>) s.generating = true;
        if constexpr (std::is_same_v<T, Reset>) s.has_context = s.preamble;
        if constexpr (std::is_same_v<T, Shutdown>) s.closed = true;
      },
      m);
}

}  // namespace infer::protocol
