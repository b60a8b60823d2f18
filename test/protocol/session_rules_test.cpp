// The session rules as a table (PROTOCOL.md §6.3): each client frame in each state, accepted or
// rejected with which code, and the state each accepted frame leads to.
#include <gtest/gtest.h>

#include <optional>

#include "protocol/session_rules.h"

namespace infer::protocol {
namespace {

constexpr SessionLimits kLimits{/*vocab_size=*/100, /*max_generate_tokens=*/10};
constexpr SessionState kFresh{};
constexpr SessionState kIdle{/*handshaken=*/true, /*generating=*/false, /*has_context=*/true};
constexpr SessionState kBusy{/*handshaken=*/true, /*generating=*/true, /*has_context=*/true};

// As the server reader decides: the limits first, then the state.
std::optional<WireError> verdict(const SessionState& s, const ClientMessage& m) {
  auto r = check_limits(kLimits, m);
  if (!r) r = check(s, m);
  if (r) {
    EXPECT_FALSE(r->message.empty());
  }
  return r ? std::optional<WireError>(r->code) : std::nullopt;
}

TEST(ProtocolSessionRules, StateTable) {
  const std::optional<WireError> ok;
  const auto order = WireError::kOutOfOrder;
  struct Row {
    ClientMessage m;
    std::optional<WireError> fresh, idle, busy;
  };
  const Row rows[] = {
      {Hello{}, ok, order, order},
      {AppendText{"x"}, order, ok, ok},  // queued while generating
      {AppendIds{{99}}, order, ok, ok},
      {Generate{}, order, ok, order},
      {Interrupt{}, order, ok, ok},  // a no-op when idle, never an error
      {StatsRequest{}, order, ok, ok},
      {TraceMark{"m"}, order, ok, ok},
      {Reset{}, order, ok, ok},
      {Shutdown{}, ok, ok, ok},
  };
  for (const auto& row : rows) {
    const char* name = opcode_name(static_cast<uint16_t>(opcode_of(row.m)));
    EXPECT_EQ(verdict(kFresh, row.m), row.fresh) << name << " before HELLO";
    EXPECT_EQ(verdict(kIdle, row.m), row.idle) << name << " when idle";
    EXPECT_EQ(verdict(kBusy, row.m), row.busy) << name << " while generating";
  }
}

TEST(ProtocolSessionRules, NothingIsAcceptedAfterShutdown) {
  SessionState s = kIdle;
  apply(s, Shutdown{});
  EXPECT_EQ(verdict(s, StatsRequest{}), WireError::kOutOfOrder);
  EXPECT_EQ(verdict(s, Shutdown{}), WireError::kOutOfOrder);
}

TEST(ProtocolSessionRules, VersionMismatchEndsTheSession) {
  auto r = check(kFresh, Hello{7, ""});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, WireError::kVersionMismatch);
  EXPECT_TRUE(r->ends_session);
  for (const ClientMessage& m : {ClientMessage{Generate{}}, ClientMessage{AppendIds{{100}}}}) {
    auto other = check(kIdle, m);
    if (other) {
      EXPECT_FALSE(other->ends_session);
    }
  }
}

TEST(ProtocolSessionRules, LimitsAreInclusive) {
  Generate g;
  g.max_tokens = kLimits.max_generate_tokens;
  g.stop_ids = {kLimits.vocab_size - 1};
  EXPECT_EQ(verdict(kIdle, g), std::nullopt);
  g.max_tokens += 1;
  EXPECT_EQ(verdict(kIdle, g), WireError::kBadValue);
  g.max_tokens = 0;
  g.stop_ids = {kLimits.vocab_size};
  EXPECT_EQ(verdict(kIdle, g), WireError::kIdOutOfRange);
  EXPECT_EQ(verdict(kIdle, AppendIds{{0, kLimits.vocab_size - 1}}), std::nullopt);
  EXPECT_EQ(verdict(kIdle, AppendIds{{kLimits.vocab_size}}), WireError::kIdOutOfRange);
}

TEST(ProtocolSessionRules, ApplyMovesTheState) {
  SessionState s;
  apply(s, Hello{});
  EXPECT_TRUE(s.handshaken);
  EXPECT_FALSE(s.has_context);
  apply(s, AppendText{""});
  EXPECT_FALSE(s.has_context);  // empty text appends nothing
  apply(s, AppendText{"a"});
  EXPECT_TRUE(s.has_context);
  apply(s, Generate{});
  EXPECT_TRUE(s.generating);
  apply(s, Interrupt{});
  EXPECT_TRUE(s.generating);  // until the server sends DONE
  generation_done(s);
  EXPECT_FALSE(s.generating);
  apply(s, Reset{});
  EXPECT_FALSE(s.has_context);
  apply(s, AppendIds{{1}});
  EXPECT_TRUE(s.has_context);
  apply(s, Shutdown{});
  EXPECT_TRUE(s.closed);
}

}  // namespace
}  // namespace infer::protocol
