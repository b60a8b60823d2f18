// Encoder and parsers: every opcode round-trips, and a few frames match bytes written by hand
// from docs/PROTOCOL.md §4 (so the spec and the code agree field by field).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "protocol/encode.h"
#include "protocol/frame.h"
#include "protocol/parse.h"
#include "test/protocol/samples.h"

namespace infer::protocol {
namespace {

// The one frame in `bytes`, cut by a fresh decoder.
Frame only_frame(const std::vector<uint8_t>& bytes, FrameDecoder& dec) {
  std::span<const uint8_t> in(bytes);
  auto ev = dec.next(in);
  EXPECT_TRUE(ev.has_value());
  EXPECT_TRUE(in.empty()) << in.size() << " bytes left after one frame";
  EXPECT_TRUE(ev && std::holds_alternative<Frame>(*ev));
  return std::get<Frame>(*ev);
}

TEST(ProtocolCodec, EveryClientOpcodeRoundTrips) {
  for (const auto& [msg, rid] : test::client_samples()) {
    std::vector<uint8_t> bytes;
    encode(msg, rid, bytes);
    FrameDecoder dec;
    const Frame f = only_frame(bytes, dec);
    EXPECT_EQ(f.header.opcode, static_cast<uint16_t>(opcode_of(msg)));
    EXPECT_EQ(f.header.request_id, rid);
    EXPECT_EQ(f.header.payload_bytes, bytes.size() - kHeaderBytes);
    auto parsed = parse_client(f);
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    EXPECT_TRUE(*parsed == msg) << opcode_name(f.header.opcode);
  }
}

TEST(ProtocolCodec, EveryServerOpcodeRoundTrips) {
  for (const auto& [msg, rid] : test::server_samples()) {
    std::vector<uint8_t> bytes;
    encode(msg, rid, bytes);
    FrameDecoder dec;
    const Frame f = only_frame(bytes, dec);
    EXPECT_EQ(f.header.opcode, static_cast<uint16_t>(opcode_of(msg)));
    EXPECT_EQ(f.header.request_id, rid);
    auto parsed = parse_server(f);
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    // Gate's -0.0f compares equal to 0.0f; the byte test below pins the bits.
    EXPECT_TRUE(*parsed == msg) << opcode_name(f.header.opcode);
    EXPECT_EQ(encode_payload(*parsed), encode_payload(msg)) << opcode_name(f.header.opcode);
  }
}

TEST(ProtocolCodec, SamplesCoverEveryOpcode) {
  std::vector<uint16_t> seen;
  for (const auto& [m, rid] : test::client_samples()) seen.push_back(uint16_t(opcode_of(m)));
  for (const auto& [m, rid] : test::server_samples()) seen.push_back(uint16_t(opcode_of(m)));
  for (uint16_t op : {0x0001, 0x0002, 0x0003, 0x0004, 0x0005, 0x0006, 0x0007, 0x0008, 0x0009,
                      0x8001, 0x8002, 0x8003, 0x8004, 0x8005, 0x8006, 0x8007, 0x8008, 0x8009,
                      0x800A, 0x0100, 0x0101, 0x0102, 0x0103, 0x0104, 0x8100, 0x8101, 0x8102,
                      0x8103, 0x8104, 0x8105, 0x0200, 0x0201, 0x0202, 0x0203, 0x0204, 0x0205,
                      0x0206, 0x0207, 0x0208, 0x0209, 0x8200, 0x8201, 0x8202, 0x8203, 0x8204,
                      0x8205, 0x8206}) {
    EXPECT_NE(std::find(seen.begin(), seen.end(), op), seen.end()) << "opcode " << op;
    EXPECT_NE(opcode_name(op), nullptr);
  }
}

TEST(ProtocolCodec, MemoryFramesMatchTheSpecBytes) {
  // §4.14 MEMORY_FORGET, request id 3, episode 0x0102030405060708.
  FrameDecoder dec;
  std::vector<uint8_t> bytes;
  encode(ClientMessage{MemoryForget{0x0102030405060708ull}}, 3, bytes);
  EXPECT_EQ(bytes, (std::vector<uint8_t>{0x08, 0, 0, 0, 0x02, 0x01, 0, 0, 0x03, 0, 0, 0,
                                         0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01}));
  // §4.17 MEMORY_LIST: total 9, one episode: id 7, pos0 64, 32 tokens, strength 1.0,
  // written 1000 ms, never recalled, preview "hi".
  bytes.clear();
  encode(ServerMessage{MemoryList{9, {{7, 64, 32, 1.0f, 1000, 0, "hi"}}}}, 4, bytes);
  const std::vector<uint8_t> want = {
      0x36, 0, 0, 0, 0x03, 0x81, 0, 0, 0x04, 0, 0, 0,  // 54 bytes: 8 + 44 + 2
      0x09, 0, 0, 0, 0x01, 0, 0, 0,                    // total 9, n 1
      0x07, 0, 0, 0, 0, 0, 0, 0,                       // episode_id
      0x40, 0, 0, 0, 0, 0, 0, 0,                       // pos0 64
      0x20, 0, 0, 0,                                   // n_tokens 32
      0x00, 0x00, 0x80, 0x3F,                          // strength 1.0
      0xE8, 0x03, 0, 0, 0, 0, 0, 0,                    // written_ms 1000
      0, 0, 0, 0, 0, 0, 0, 0,                          // recalled_ms 0
      0x02, 0, 0, 0, 'h', 'i'};                        // preview
  EXPECT_EQ(bytes, want);
  // §4.18 MEMORY_EVENT is fixed 36 bytes.
  EXPECT_EQ(encode_payload(ServerMessage{MemoryEvent{}}).size(), 36u);
  EXPECT_EQ(encode_payload(ServerMessage{MemoryRecalled{{RecalledEpisode{}}}}).size(), 4u + 28u);
  EXPECT_EQ(encode_payload(ServerMessage{MemoryStored{{StoredEpisode{}}}}).size(), 4u + 20u);
}

TEST(ProtocolCodec, ListPreviewsAreCutAtACharacterBoundary) {
  // 95 ASCII bytes then "é": 97 bytes, the limit is 96: the é goes whole.
  const std::string preview = std::string(95, 'a') + "\xC3\xA9";
  const auto p = encode_payload(ServerMessage{MemoryList{1, {{1, 0, 1, 1.0f, 0, 0, preview}}}});
  auto parsed = parse_server_payload(uint16_t(Opcode::kMemoryList), p);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(std::get<MemoryList>(*parsed).episodes.at(0).preview, std::string(95, 'a'));
}

std::vector<uint8_t> client_frame(const ClientMessage& m, uint32_t rid) {
  std::vector<uint8_t> out;
  encode(m, rid, out);
  return out;
}
std::vector<uint8_t> server_frame(const ServerMessage& m, uint32_t rid) {
  std::vector<uint8_t> out;
  encode(m, rid, out);
  return out;
}

TEST(ProtocolCodec, HelloMatchesTheSpecBytes) {
  // PROTOCOL.md §4.1: header (len 7, op 0x0001, flags 0, rid 1), u32 version 1, "cli".
  const std::vector<uint8_t> want = {0x07, 0, 0, 0, 0x01, 0x00, 0, 0, 0x01, 0, 0, 0,
                                     0x01, 0, 0, 0, 'c', 'l', 'i'};
  EXPECT_EQ(client_frame(Hello{1, "cli"}, 1), want);
}

TEST(ProtocolCodec, GenerateMatchesTheSpecBytes) {
  Generate g;
  g.max_tokens = 16;
  g.flags = kGenStopAtEot;
  g.seed = 0x1122334455667788ull;
  g.temperature = 1.0f;  // 0x3F800000
  g.top_p = 0.5f;        // 0x3F000000
  g.top_k = 40;
  g.stop_ids = {106};
  const std::vector<uint8_t> want = {
      0x24, 0, 0, 0, 0x04, 0x00, 0, 0, 0x0D, 0x0C, 0x0B, 0x0A,  // len 36, GENERATE, rid
      0x10, 0, 0, 0,                                            // max_tokens 16
      0x02, 0, 0, 0,                                            // flags STOP_AT_EOT
      0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,           // seed
      0x00, 0x00, 0x80, 0x3F,                                   // temperature 1.0
      0x00, 0x00, 0x00, 0x3F,                                   // top_p 0.5
      0x28, 0, 0, 0,                                            // top_k 40
      0x01, 0, 0, 0,                                            // n_stop_ids 1
      0x6A, 0, 0, 0,                                            // stop id 106
  };
  EXPECT_EQ(client_frame(g, 0x0A0B0C0D), want);
}

TEST(ProtocolCodec, TokenMatchesTheSpecBytes) {
  const std::vector<uint8_t> want = {
      0x12, 0, 0, 0, 0x02, 0x80, 0, 0, 0x05, 0, 0, 0,  // len 18, TOKEN 0x8002, rid 5
      0x45, 0x23, 0x01, 0x00,                          // id 0x12345
      0x02, 0, 0, 0,                                   // index 2
      0, 0, 0, 0, 0x01, 0, 0, 0,                       // pos 2^32
      0xC3, 0xA9,                                      // "é"
  };
  EXPECT_EQ(server_frame(Token{0x12345, 2, 1ull << 32, "\xC3\xA9"}, 5), want);
}

TEST(ProtocolCodec, ErrorDoneAndEmptyFramesMatchTheSpecBytes) {
  const std::vector<uint8_t> error = {0x08, 0, 0, 0, 0x06, 0x80, 0, 0, 0x09, 0, 0, 0,
                                      0x04, 0x00, 0x04, 0x00, 'b', 'u', 's', 'y'};
  EXPECT_EQ(server_frame(ErrorFrame{WireError::kOutOfOrder, 0x0004, "busy"}, 9), error);
  const std::vector<uint8_t> done = {0x14, 0, 0, 0, 0x04, 0x80, 0, 0, 0x07, 0, 0, 0,
                                     0x03, 0, 0, 0,               // reason LIMIT
                                     0x10, 0, 0, 0,               // n_tokens 16
                                     0x2C, 0x01, 0, 0, 0, 0, 0, 0,  // pos 300
                                     0x6A, 0, 0, 0};              // last id 106
  EXPECT_EQ(server_frame(Done{DoneReason::kLimit, 16, 300, 106, ""}, 7), done);
  const std::vector<uint8_t> interrupt = {0, 0, 0, 0, 0x05, 0x00, 0, 0, 0x03, 0, 0, 0};
  EXPECT_EQ(client_frame(Interrupt{}, 3), interrupt);
}

TEST(ProtocolCodec, GateKeepsFloatBitsExactly) {
  Gate g{GateDecision::kAct, 1, -0.0f, 1.0f, 0.0f, 0.25f, 3.0f};
  const auto bytes = encode_payload(ServerMessage{g});
  ASSERT_EQ(bytes.size(), 28u);
  // -0.0f is 0x80000000: the sign bit in the last byte of the third field.
  EXPECT_EQ(bytes[8 + 3], 0x80);
}

TEST(ProtocolCodec, ErrorMessagesAreCutAtACharacterBoundary) {
  std::string long_msg(kMaxMessageBytes - 1, 'a');
  long_msg += "\xE2\x86\x92 tail";  // a 3-byte character straddling the limit
  const auto bytes = encode_payload(ServerMessage{ErrorFrame{WireError::kEngine, 0, long_msg}});
  EXPECT_EQ(bytes.size(), 4 + kMaxMessageBytes - 1);
  auto parsed = parse_server_payload(0x8006, bytes);
  EXPECT_TRUE(parsed.ok());
}

TEST(ProtocolCodec, SplitTextKeepsCharactersWhole) {
  const std::string text = "ab\xC3\xA9\xF0\x9F\x98\x80z";  // 1+1+2+4+1 bytes
  const auto pieces = split_text(text, 4);
  std::string joined;
  for (auto p : pieces) {
    EXPECT_LE(p.size(), 4u);
    EXPECT_TRUE(parse_client_payload(0x0002, std::span<const uint8_t>(
                                                 reinterpret_cast<const uint8_t*>(p.data()),
                                                 p.size())).ok()) << p;
    joined += p;
  }
  EXPECT_EQ(joined, text);
  EXPECT_EQ(pieces.size(), 3u);  // "ab\xC3\xA9", "\xF0\x9F\x98\x80", "z"
}

}  // namespace
}  // namespace infer::protocol
