// Every malformed, oversized and out-of-order case of PROTOCOL.md §6 through ServerReader: the
// documented ERROR code, the offending frame's request id and opcode, and the next good frame
// still read (the session continues).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "protocol/bytes.h"
#include "protocol/encode.h"
#include "protocol/server_reader.h"

namespace infer::protocol {
namespace {

constexpr SessionLimits kLimits{/*vocab_size=*/1000, /*max_generate_tokens=*/512};

std::vector<uint8_t> raw(uint16_t op, uint32_t rid, const std::vector<uint8_t>& payload,
                         uint16_t flags = 0) {
  std::vector<uint8_t> out;
  put_header(out, FrameHeader{static_cast<uint32_t>(payload.size()), op, flags, rid});
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

std::vector<uint8_t> frame(const ClientMessage& m, uint32_t rid) {
  std::vector<uint8_t> out;
  encode(m, rid, out);
  return out;
}

std::vector<uint8_t> generate_payload(float temperature, float top_p, uint32_t flags,
                                      std::vector<uint32_t> stop = {}) {
  Generate g;
  g.temperature = temperature;
  g.top_p = top_p;
  g.flags = flags;
  g.stop_ids = std::move(stop);
  return encode_payload(ClientMessage{g});
}

// Sends HELLO (unless `handshake` is false) and APPEND_IDS{5}, then `bad` (request id 42), then a
// good TRACE_MARK (id 43); expects exactly one rejection with `code` between them.
void expect_rejected_then_recovers(const std::vector<uint8_t>& bad, WireError code,
                                   bool handshake = true, SessionLimits limits = kLimits) {
  std::vector<uint8_t> bytes;
  if (handshake) {
    bytes = frame(Hello{}, 1);
    const auto ids = frame(AppendIds{{5}}, 2);
    bytes.insert(bytes.end(), ids.begin(), ids.end());
  }
  bytes.insert(bytes.end(), bad.begin(), bad.end());
  const auto good = frame(handshake ? ClientMessage{TraceMark{"ok"}} : ClientMessage{Hello{}}, 43);
  bytes.insert(bytes.end(), good.begin(), good.end());
  // Byte by byte too: the outcome must not depend on how the input was cut.
  for (size_t chunk : {bytes.size(), size_t{1}, size_t{5}}) {
    ServerReader r(limits);
    std::vector<ReaderEvent> ev;
    for (size_t at = 0; at < bytes.size(); at += chunk) {
      r.feed(std::span<const uint8_t>(bytes.data() + at, std::min(chunk, bytes.size() - at)), ev);
    }
    const size_t lead = handshake ? 2 : 0;
    ASSERT_EQ(ev.size(), lead + 2) << "chunk " << chunk;
    for (size_t i = 0; i < lead; ++i) ASSERT_TRUE(std::holds_alternative<Accepted>(ev[i]));
    ASSERT_TRUE(std::holds_alternative<Rejected>(ev[lead])) << "chunk " << chunk;
    const auto& rej = std::get<Rejected>(ev[lead]);
    EXPECT_EQ(rej.code, code) << wire_error_name(rej.code) << ": " << rej.message;
    EXPECT_EQ(rej.request_id, 42u);
    EXPECT_EQ(rej.opcode, read_header(bad.data()).opcode);
    EXPECT_FALSE(rej.message.empty());
    EXPECT_FALSE(rej.ends_session);
    ASSERT_TRUE(std::holds_alternative<Accepted>(ev[lead + 1])) << "chunk " << chunk;
    EXPECT_EQ(std::get<Accepted>(ev[lead + 1]).request_id, 43u);
    EXPECT_FALSE(r.finish().has_value());
  }
}

TEST(ProtocolErrors, PayloadTooShortOrTooLong) {
  expect_rejected_then_recovers(raw(0x0005, 42, {0}), WireError::kMalformed);           // INTERRUPT
  expect_rejected_then_recovers(raw(0x0006, 42, {0, 0, 0, 0}), WireError::kMalformed);  // STATS_REQ
  expect_rejected_then_recovers(raw(0x0008, 42, {1}), WireError::kMalformed);           // RESET
  expect_rejected_then_recovers(raw(0x0003, 42, {1, 0, 0}), WireError::kMalformed);     // APPEND_IDS
  auto gen = generate_payload(0.0f, 1.0f, 0);
  gen.pop_back();
  expect_rejected_then_recovers(raw(0x0004, 42, gen), WireError::kMalformed);
  gen = generate_payload(0.0f, 1.0f, 0);
  gen.push_back(0);
  expect_rejected_then_recovers(raw(0x0004, 42, gen), WireError::kMalformed);
  // n_stop_ids says 2, one id present.
  gen = generate_payload(0.0f, 1.0f, 0, {7});
  gen[28] = 2;
  expect_rejected_then_recovers(raw(0x0004, 42, gen), WireError::kMalformed);
}

TEST(ProtocolErrors, TooManyStopIdsIsMalformed) {
  std::vector<uint32_t> stop(kMaxStopIds + 1, 3);
  expect_rejected_then_recovers(raw(0x0004, 42, generate_payload(0.0f, 1.0f, 0, stop)),
                                WireError::kMalformed);
}

TEST(ProtocolErrors, ReservedBitsAreMalformed) {
  expect_rejected_then_recovers(raw(0x0007, 42, {'x'}, /*flags=*/1), WireError::kMalformed);
  expect_rejected_then_recovers(raw(0x0004, 42, generate_payload(0.0f, 1.0f, 1u << 7)),
                                WireError::kMalformed);
}

TEST(ProtocolErrors, InvalidUtf8IsMalformed) {
  for (std::vector<uint8_t> bad : std::vector<std::vector<uint8_t>>{
           {0xC3},                    // cut character
           {0xC0, 0xAF},              // overlong '/'
           {0xED, 0xA0, 0x80},        // surrogate
           {0xF4, 0x90, 0x80, 0x80},  // above U+10FFFF
           {'a', 0x80},               // stray continuation
           {0xFF}}) {
    expect_rejected_then_recovers(raw(0x0002, 42, bad), WireError::kMalformed);  // APPEND_TEXT
    expect_rejected_then_recovers(raw(0x0007, 42, bad), WireError::kMalformed);  // TRACE_MARK
  }
  expect_rejected_then_recovers(raw(0x0001, 42, {1, 0, 0, 0, 0xFE}), WireError::kMalformed,
                                /*handshake=*/false);
}

TEST(ProtocolErrors, OverlongLabelIsMalformed) {
  expect_rejected_then_recovers(raw(0x0007, 42, std::vector<uint8_t>(kMaxLabelBytes + 1, 'a')),
                                WireError::kMalformed);
}

TEST(ProtocolErrors, BadSamplingValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  expect_rejected_then_recovers(raw(0x0004, 42, generate_payload(-0.5f, 1.0f, 0)),
                                WireError::kBadValue);
  expect_rejected_then_recovers(raw(0x0004, 42, generate_payload(nan, 1.0f, 0)),
                                WireError::kBadValue);
  expect_rejected_then_recovers(raw(0x0004, 42, generate_payload(inf, 1.0f, 0)),
                                WireError::kBadValue);
  expect_rejected_then_recovers(raw(0x0004, 42, generate_payload(1.0f, 0.0f, 0)),
                                WireError::kBadValue);
  expect_rejected_then_recovers(raw(0x0004, 42, generate_payload(1.0f, 1.5f, 0)),
                                WireError::kBadValue);
  expect_rejected_then_recovers(raw(0x0004, 42, generate_payload(1.0f, nan, 0)),
                                WireError::kBadValue);
}

TEST(ProtocolErrors, DefaultSamplingIgnoresTheSamplingFields) {
  ServerReader r(kLimits);
  std::vector<ReaderEvent> ev;
  for (const auto& f : {frame(Hello{}, 1), frame(AppendText{"x"}, 2),
                        raw(0x0004, 3, generate_payload(-1.0f, 0.0f, kGenDefaultSampling))}) {
    r.feed(f, ev);
  }
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_TRUE(std::holds_alternative<Accepted>(ev[2]));
}

TEST(ProtocolErrors, UnknownAndWrongDirectionOpcodes) {
  expect_rejected_then_recovers(raw(0x0000, 42, {}), WireError::kUnknownOpcode);
  expect_rejected_then_recovers(raw(0x000A, 42, {}), WireError::kUnknownOpcode);
  expect_rejected_then_recovers(raw(0x7FFF, 42, {1, 2, 3}), WireError::kUnknownOpcode);
  expect_rejected_then_recovers(raw(0x8002, 42, std::vector<uint8_t>(16)),
                                WireError::kUnknownOpcode);  // TOKEN sent by a client
  expect_rejected_then_recovers(raw(0x8101, 42, {}), WireError::kUnknownOpcode);
  // Unknown opcodes are reported as such even with flags set.
  expect_rejected_then_recovers(raw(0x00FF, 42, {}, 3), WireError::kUnknownOpcode);
}

TEST(ProtocolErrors, ReservedMemoryAndToolsOpcodesAreNotAvailable) {
  for (uint16_t op : {0x0100, 0x0101, 0x01FF, 0x0200, 0x0201, 0x02FF}) {
    expect_rejected_then_recovers(raw(op, 42, {9, 9}), WireError::kNotAvailable);
  }
}

TEST(ProtocolErrors, WithoutMemoryEveryMemoryRequestIsNotAvailableWhateverItsPayload) {
  // The opcode is checked first (§6.2): a malformed MEMORY_FORGET is NOT_AVAILABLE too.
  for (uint16_t op : {0x0100, 0x0101, 0x0102, 0x0103, 0x0104, 0x0105}) {
    expect_rejected_then_recovers(raw(op, 42, {}), WireError::kNotAvailable);
    expect_rejected_then_recovers(raw(op, 42, {1, 2, 3}), WireError::kNotAvailable);
  }
}

TEST(ProtocolErrors, MalformedMemoryRequestsAreRejectedWithMemoryOn) {
  SessionLimits on = kLimits;
  on.memory = true;
  const auto u32 = [](uint32_t v) { std::vector<uint8_t> b; put_u32(b, v); return b; };
  expect_rejected_then_recovers(raw(0x0102, 42, {1, 2, 3, 4}), WireError::kMalformed, true, on);
  expect_rejected_then_recovers(raw(0x0101, 42, {0}), WireError::kMalformed, true, on);
  expect_rejected_then_recovers(raw(0x0100, 42, {0xC3}), WireError::kMalformed, true, on);
  expect_rejected_then_recovers(raw(0x0103, 42, u32(0)), WireError::kMalformed, true, on);
  std::vector<uint8_t> too_many = u32(0);
  put_u32(too_many, kMaxListEpisodes + 1);
  expect_rejected_then_recovers(raw(0x0103, 42, too_many), WireError::kBadValue, true, on);
  expect_rejected_then_recovers(raw(0x0104, 42, u32(2)), WireError::kBadValue, true, on);
  // Opcodes of the range that v1 does not define, and answers sent the wrong way.
  expect_rejected_then_recovers(raw(0x0105, 42, {}), WireError::kNotAvailable, true, on);
  expect_rejected_then_recovers(raw(0x8100, 42, u32(0)), WireError::kUnknownOpcode, true, on);
  // Before HELLO: out of order (the session's state comes after the payload's checks).
  expect_rejected_then_recovers(frame(MemoryStore{}, 42), WireError::kOutOfOrder, false, on);
}

TEST(ProtocolErrors, OversizedFrameIsSkippedWithoutAllocating) {
  std::vector<uint8_t> big;
  put_header(big, FrameHeader{kMaxPayloadBytes + 1, 0x0002, 0, 42});
  big.insert(big.end(), kMaxPayloadBytes + 1, 'a');  // valid text, but too much of it
  expect_rejected_then_recovers(big, WireError::kFrameTooLarge);
}

TEST(ProtocolErrors, IdsOutOfRange) {
  expect_rejected_then_recovers(frame(AppendIds{{1, 999, 1000}}, 42), WireError::kIdOutOfRange);
  expect_rejected_then_recovers(frame(AppendIds{{0xFFFFFFFFu}}, 42), WireError::kIdOutOfRange);
  Generate g;
  g.stop_ids = {1000};
  expect_rejected_then_recovers(frame(g, 42), WireError::kIdOutOfRange);
}

TEST(ProtocolErrors, TooManyTokensIsBadValue) {
  Generate g;
  g.max_tokens = kLimits.max_generate_tokens + 1;
  expect_rejected_then_recovers(frame(g, 42), WireError::kBadValue);
}

TEST(ProtocolErrors, AnythingBeforeHelloIsOutOfOrder) {
  expect_rejected_then_recovers(frame(AppendText{"hi"}, 42), WireError::kOutOfOrder, false);
  expect_rejected_then_recovers(frame(StatsRequest{}, 42), WireError::kOutOfOrder, false);
  expect_rejected_then_recovers(frame(Generate{}, 42), WireError::kOutOfOrder, false);
  expect_rejected_then_recovers(frame(Interrupt{}, 42), WireError::kOutOfOrder, false);
}

TEST(ProtocolErrors, SecondHelloIsOutOfOrder) {
  expect_rejected_then_recovers(frame(Hello{}, 42), WireError::kOutOfOrder);
}

TEST(ProtocolErrors, GenerateWhileGeneratingIsOutOfOrder) {
  ServerReader r(kLimits);
  std::vector<ReaderEvent> ev;
  for (const auto& f : {frame(Hello{}, 1), frame(AppendText{"x"}, 2), frame(Generate{}, 3),
                        frame(AppendText{"more"}, 4), frame(Generate{}, 5),
                        frame(StatsRequest{}, 6), frame(Interrupt{}, 7)}) {
    r.feed(f, ev);
  }
  ASSERT_EQ(ev.size(), 7u);
  for (size_t i : {0, 1, 2, 3, 5, 6}) EXPECT_TRUE(std::holds_alternative<Accepted>(ev[i])) << i;
  ASSERT_TRUE(std::holds_alternative<Rejected>(ev[4]));
  EXPECT_EQ(std::get<Rejected>(ev[4]).code, WireError::kOutOfOrder);
  EXPECT_EQ(std::get<Rejected>(ev[4]).request_id, 5u);
  // Once the server sends DONE, the next GENERATE is fine.
  r.generation_done();
  ev.clear();
  r.feed(frame(Generate{}, 8), ev);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<Accepted>(ev[0]));
}

TEST(ProtocolErrors, GenerateOnAnEmptyContextIsBadValue) {
  ServerReader r(kLimits);
  std::vector<ReaderEvent> ev;
  for (const auto& f : {frame(Hello{}, 1), frame(Generate{}, 2), frame(AppendIds{{}}, 3),
                        frame(Generate{}, 4), frame(AppendIds{{7}}, 5), frame(Reset{}, 6),
                        frame(Generate{}, 7)}) {
    r.feed(f, ev);
  }
  ASSERT_EQ(ev.size(), 7u);
  for (size_t i : {1, 3, 6}) {
    ASSERT_TRUE(std::holds_alternative<Rejected>(ev[i])) << i;
    EXPECT_EQ(std::get<Rejected>(ev[i]).code, WireError::kBadValue);
  }
}

// §6.2's order on a frame with several faults: the payload's values, then the values against the
// server's limits, then the header flags, then the session's state; the empty context last.
TEST(ProtocolErrors, ChecksGoInTheDocumentedOrder) {
  const auto rejected = [](bool handshake, const std::vector<uint8_t>& bad) {
    ServerReader r(kLimits);
    std::vector<ReaderEvent> ev;
    if (handshake) r.feed(frame(Hello{}, 1), ev);
    ev.clear();
    r.feed(bad, ev);
    EXPECT_EQ(ev.size(), 1u);
    const auto* rej = ev.empty() ? nullptr : std::get_if<Rejected>(&ev[0]);
    return rej != nullptr ? std::optional<WireError>(rej->code) : std::nullopt;
  };
  Generate too_many;
  too_many.max_tokens = kLimits.max_generate_tokens + 1;
  const std::vector<uint8_t> big = encode_payload(ClientMessage{too_many});
  const uint16_t gen = uint16_t(Opcode::kGenerate);
  // Before HELLO with flags set: the payload's own value (temperature NaN) comes first, then the
  // server's limit, then the flags; only a frame clean of all three meets OUT_OF_ORDER.
  const std::vector<uint8_t> nan = generate_payload(std::nanf(""), 1.0f, kGenStopAtEot);
  EXPECT_EQ(rejected(false, raw(gen, 42, nan, 1)), WireError::kBadValue);
  EXPECT_EQ(rejected(false, raw(gen, 42, big, 1)), WireError::kBadValue);
  Generate stop_out;
  stop_out.stop_ids = {kLimits.vocab_size};
  EXPECT_EQ(rejected(false, raw(gen, 42, encode_payload(ClientMessage{stop_out}), 1)),
            WireError::kIdOutOfRange);
  EXPECT_EQ(rejected(false, raw(gen, 42, encode_payload(ClientMessage{Generate{}}), 1)),
            WireError::kMalformed);
  EXPECT_EQ(rejected(false, frame(Generate{}, 42)), WireError::kOutOfOrder);
  // After HELLO with nothing appended: the limit before the empty context.
  EXPECT_EQ(rejected(true, raw(gen, 42, big, 0)), WireError::kBadValue);
  EXPECT_EQ(rejected(true, frame(Generate{}, 42)), WireError::kBadValue);
  EXPECT_EQ(rejected(true, raw(uint16_t(Opcode::kAppendIds), 42,
                               encode_payload(ClientMessage{AppendIds{{kLimits.vocab_size}}}), 1)),
            WireError::kIdOutOfRange);
}

TEST(ProtocolErrors, VersionMismatchEndsTheSession) {
  ServerReader r(kLimits);
  std::vector<ReaderEvent> ev;
  auto bytes = frame(Hello{kProtocolVersion + 1, "future"}, 9);
  const auto more = frame(Hello{}, 10);
  bytes.insert(bytes.end(), more.begin(), more.end());
  r.feed(bytes, ev);
  ASSERT_EQ(ev.size(), 1u);  // the HELLO after it is not read
  const auto& rej = std::get<Rejected>(ev[0]);
  EXPECT_EQ(rej.code, WireError::kVersionMismatch);
  EXPECT_TRUE(rej.ends_session);
  EXPECT_EQ(rej.request_id, 9u);
  EXPECT_NE(rej.message.find("version 2"), std::string::npos) << rej.message;
  EXPECT_TRUE(r.closed());
}

TEST(ProtocolErrors, ShutdownStopsReadingAndIsAcceptedBeforeHello) {
  ServerReader r(kLimits);
  std::vector<ReaderEvent> ev;
  auto bytes = frame(Shutdown{}, 1);
  const auto more = frame(Hello{}, 2);
  bytes.insert(bytes.end(), more.begin(), more.end());
  r.feed(bytes, ev);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<Shutdown>(std::get<Accepted>(ev[0]).message));
  EXPECT_TRUE(r.closed());
  EXPECT_FALSE(r.finish().has_value());
}

TEST(ProtocolErrors, EofInsideAFrameIsTruncated) {
  ServerReader r(kLimits);
  std::vector<ReaderEvent> ev;
  auto bytes = frame(Hello{}, 1);
  r.feed(bytes, ev);
  EXPECT_FALSE(r.finish().has_value());  // clean EOF between frames
  bytes = frame(AppendText{"cut short"}, 2);
  r.feed(std::span<const uint8_t>(bytes.data(), bytes.size() - 3), ev);
  const auto rej = r.finish();
  ASSERT_TRUE(rej.has_value());
  EXPECT_EQ(rej->code, WireError::kTruncated);
  EXPECT_NE(rej->message.find("18 of 21"), std::string::npos) << rej->message;
}

TEST(ProtocolErrors, ErrorFrameCarriesCodeOpcodeAndMessage) {
  Rejected rej{42, 0x0004, WireError::kBadValue, "top_p 0 is not in (0, 1]"};
  const ErrorFrame e = rej.error_frame();
  EXPECT_EQ(e.code, WireError::kBadValue);
  EXPECT_EQ(e.opcode, 0x0004);
  EXPECT_EQ(e.message, rej.message);
}

}  // namespace
}  // namespace infer::protocol
