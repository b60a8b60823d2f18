// The tool frames' codec (PROTOCOL.md §4.20-§4.28): the spec's example bytes, every malformed
// and out-of-range case through ServerReader with tools on (the documented ERROR code, and the
// next frame still read), server frames a client must refuse, and TOOL_DECLARE's tools read back.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "protocol/bytes.h"
#include "protocol/encode.h"
#include "protocol/parse.h"
#include "protocol/server_reader.h"
#include "protocol/tool_json.h"

namespace infer::protocol {
namespace {

std::vector<uint8_t> raw(uint16_t op, uint32_t rid, const std::string& payload, uint16_t flags = 0) {
  std::vector<uint8_t> out;
  put_header(out, FrameHeader{static_cast<uint32_t>(payload.size()), op, flags, rid});
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}
std::string u16(uint16_t v) { return std::string{char(v & 0xFF), char(v >> 8)}; }
std::string u32(uint32_t v) { return u16(uint16_t(v)) + u16(uint16_t(v >> 16)); }
std::string u64(uint64_t v) { return u32(uint32_t(v)) + u32(uint32_t(v >> 32)); }

// HELLO, then `bad` (request id 42), then TRACE_MARK (43), into a reader with tools on: the one
// rejection's code, and that TRACE_MARK was still accepted. nullopt-like kEngine if none.
WireError rejection(const std::vector<uint8_t>& bad, bool tools = true) {
  std::vector<uint8_t> bytes;
  encode(ClientMessage{Hello{}}, 1, bytes);
  bytes.insert(bytes.end(), bad.begin(), bad.end());
  encode(ClientMessage{TraceMark{"ok"}}, 43, bytes);
  ServerReader r(SessionLimits{1000, 512, false, tools});
  std::vector<ReaderEvent> ev;
  r.feed(bytes, ev);
  EXPECT_EQ(ev.size(), 3u);
  if (ev.size() != 3) return WireError::kEngine;
  EXPECT_EQ(std::get<Accepted>(ev[2]).request_id, 43u);
  const auto* rej = std::get_if<Rejected>(&ev[1]);
  if (rej == nullptr) return WireError::kEngine;
  EXPECT_EQ(rej->request_id, 42u);
  EXPECT_FALSE(rej->message.empty());
  return rej->code;
}
WireError rejection(uint16_t op, const std::string& payload) { return rejection(raw(op, 42, payload)); }

constexpr auto kMalformed = WireError::kMalformed;
constexpr auto kBadValue = WireError::kBadValue;
constexpr auto kNone = WireError::kEngine;  // accepted

TEST(ProtocolToolFrames, MatchTheSpecBytes) {
  // §4.24 PTY_OPEN, request id 4: 24 x 80, cwd "", argv bash -i.
  std::vector<uint8_t> bytes;
  encode(ClientMessage{PtyOpen{24, 80, 0, "", {"bash", "-i"}}}, 4, bytes);
  EXPECT_EQ(bytes, (std::vector<uint8_t>{0x13, 0, 0, 0, 0x03, 0x02, 0, 0, 0x04, 0, 0, 0,
                                         0x18, 0, 0x50, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                         'b', 'a', 's', 'h', 0, '-', 'i'}));
  // §4.22 TOOL_RESULT, request id 9: call 5 ok, {"t":1}.
  bytes.clear();
  encode(ClientMessage{ToolResult{5, ToolStatus::kOk, R"({"t":1})"}}, 9, bytes);
  EXPECT_EQ(bytes, (std::vector<uint8_t>{0x0F, 0, 0, 0, 0x01, 0x02, 0, 0, 0x09, 0, 0, 0, 5, 0, 0, 0,
                                         0, 0, 0, 0, '{', '"', 't', '"', ':', '1', '}'}));
  // §4.28 TOOL_EVENT, request id 8: interrupt 2 snoozed until the turn ends, PTY 1, 120 bytes.
  bytes.clear();
  encode(ServerMessage{ToolEvent{InterruptEvent{2, InterruptState::kSnoozed, InterruptSource::kPty,
                                                1, 0, 120, 0, 0}}},
         8, bytes);
  std::vector<uint8_t> want = {0x2C, 0, 0, 0, 0x05, 0x82, 0, 0, 0x08, 0, 0, 0, 4, 0, 0, 0, 2, 0, 0, 0,
                               3, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 120};
  want.resize(kHeaderBytes + 44, 0);
  EXPECT_EQ(bytes, want);
}

TEST(ProtocolToolFrames, MalformedAndBadDeclarations) {
  const uint16_t op = 0x0200;
  EXPECT_EQ(rejection(op, "[]"), kNone);
  EXPECT_EQ(rejection(op, R"([{"name":"a.b-c_$1"}])"), kNone);  // description and parameters optional
  EXPECT_EQ(rejection(op, "[{"), kMalformed);
  EXPECT_EQ(rejection(op, ""), kMalformed);
  EXPECT_EQ(rejection(op, "[\"\xC3\"]"), kMalformed);  // not UTF-8
  EXPECT_EQ(rejection(op, R"({"name":"x"})"), kBadValue);  // not an array
  EXPECT_EQ(rejection(op, R"([{"name":"a b"}])"), kBadValue);
  EXPECT_EQ(rejection(op, R"([{"name":""}])"), kBadValue);
  EXPECT_EQ(rejection(op, "[{\"name\":\"" + std::string(129, 'a') + "\"}]"), kBadValue);
  EXPECT_EQ(rejection(op, R"([{"name":"x"},{"name":"x"}])"), kBadValue);
  EXPECT_EQ(rejection(op, R"([{"name":"x","descr":"typo"}])"), kBadValue);
  EXPECT_EQ(rejection(op, R"([{"name":"x","parameters":"object"}])"), kBadValue);
  EXPECT_EQ(rejection(op, R"([{"name":"x","description":7}])"), kBadValue);
  EXPECT_EQ(rejection(op, "[{\"name\":\"x\",\"description\":\"" + std::string(4097, 'd') + "\"}]"),
            kBadValue);
  std::string many = "[";
  for (int i = 0; i < 65; ++i) many += (i ? ",{\"name\":\"t" : "{\"name\":\"t") + std::to_string(i) + "\"}";
  EXPECT_EQ(rejection(op, many + "]"), kBadValue);
  // Nesting: 64 levels are read; deeper is refused before a value is built, even 500,000 deep.
  EXPECT_EQ(rejection(op, R"([{"name":"x","parameters":{"a":)" + std::string(61, '[') +
                              std::string(61, ']') + "}}]"),
            kNone);  // 64 deep
  EXPECT_EQ(rejection(op, R"([{"name":"x","parameters":{"a":)" + std::string(62, '[') +
                              std::string(62, ']') + "}}]"),
            kBadValue);  // 65 deep
  EXPECT_EQ(rejection(op, std::string(500000, '[')), kBadValue);
}

TEST(ProtocolToolFrames, MalformedAndBadResults) {
  const uint16_t op = 0x0201;
  EXPECT_EQ(rejection(op, u32(1) + u32(0) + "42"), kNone);  // any JSON value
  EXPECT_EQ(rejection(op, u32(1) + u32(1) + ""), kNone);    // an error may be empty
  EXPECT_EQ(rejection(op, u32(1) + std::string(3, '\0')), kMalformed);
  EXPECT_EQ(rejection(op, u32(1) + u32(2) + "{}"), kBadValue);
  EXPECT_EQ(rejection(op, u32(1) + u32(0) + ""), kMalformed);
  EXPECT_EQ(rejection(op, u32(1) + u32(0) + "{'a':1}"), kMalformed);
  EXPECT_EQ(rejection(op, u32(1) + u32(0) + "{} {}"), kMalformed);
  EXPECT_EQ(rejection(op, u32(1) + u32(0) + "NaN"), kMalformed);
  EXPECT_EQ(rejection(op, u32(1) + u32(0) + std::string(65, '[') + std::string(65, ']')), kBadValue);
  EXPECT_EQ(rejection(op, u32(1) + u32(1) + std::string(4097, 'e')), kMalformed);
  EXPECT_EQ(rejection(op, u32(1) + u32(1) + "\xFF"), kMalformed);
}

TEST(ProtocolToolFrames, MalformedAndBadPtyFrames) {
  const auto open = [](uint16_t rows, uint16_t cols, uint32_t flags, const std::string& cwd,
                       const std::string& argv, uint32_t cwd_bytes = 0xFFFFFFFF) {
    return u16(rows) + u16(cols) + u32(flags) +
           u32(cwd_bytes == 0xFFFFFFFF ? uint32_t(cwd.size()) : cwd_bytes) + cwd + argv;
  };
  EXPECT_EQ(rejection(0x0203, open(24, 80, 0, "sub", std::string("sh\0-c\0", 6))), kNone);
  EXPECT_EQ(rejection(0x0203, open(24, 80, 0, "", "sh").substr(0, 11)), kMalformed);
  EXPECT_EQ(rejection(0x0203, open(24, 80, 0, "ab", "sh", 50)), kMalformed);  // cwd past the end
  EXPECT_EQ(rejection(0x0203, open(24, 80, 0, std::string(4097, 'c'), "sh")), kMalformed);
  EXPECT_EQ(rejection(0x0203, open(24, 80, 0, "", "sh" + std::string(256, '\0'))), kMalformed);
  EXPECT_EQ(rejection(0x0203, open(24, 80, 0, "", "sh" + std::string(255, '\0'))), kNone);
  EXPECT_EQ(rejection(0x0203, open(24, 80, 0, "", std::string(4097, 'a'))), kMalformed);
  EXPECT_EQ(rejection(0x0203, open(24, 80, 0, "", "\xC3(")), kMalformed);
  EXPECT_EQ(rejection(0x0203, open(24, 80, 1, "", "sh")), kMalformed);
  EXPECT_EQ(rejection(0x0203, open(24, 80, 0, "", "")), kBadValue);  // no program
  EXPECT_EQ(rejection(0x0203, open(24, 80, 0, "", std::string("\0sh", 3))), kBadValue);
  EXPECT_EQ(rejection(0x0203, open(0, 80, 0, "", "sh")), kBadValue);
  EXPECT_EQ(rejection(0x0204, u32(1) + u32(0) + std::string(65536, 'x')), kNone);
  EXPECT_EQ(rejection(0x0204, u32(1) + u32(0) + std::string(65537, 'x')), kMalformed);
  EXPECT_EQ(rejection(0x0204, u32(1) + u32(2) + "x"), kBadValue);
  EXPECT_EQ(rejection(0x0204, u32(1) + u32(1) + ""), kBadValue);
  EXPECT_EQ(rejection(0x0204, u32(1) + u32(1) + std::string(33, 'k')), kMalformed);
  EXPECT_EQ(rejection(0x0204, u32(1) + u16(1)), kMalformed);
  EXPECT_EQ(rejection(0x0205, u32(1) + u16(0) + u16(80)), kBadValue);
  EXPECT_EQ(rejection(0x0205, u32(1) + u16(1) + u16(80) + std::string(1, '\0')), kMalformed);
  EXPECT_EQ(rejection(0x0206, u32(1) + std::string(1, '\0')), kMalformed);
  EXPECT_EQ(rejection(0x0207, u32(1) + u32(1) + u64(0) + u32(1)), kNone);
  EXPECT_EQ(rejection(0x0207, u32(1) + u32(2) + u64(0) + u32(1)), kBadValue);
  EXPECT_EQ(rejection(0x0207, u32(1) + u32(0) + u64(0) + u32(0)), kBadValue);
  EXPECT_EQ(rejection(0x0207, u32(1) + u32(0) + u64(0) + u32(65537)), kBadValue);
}

TEST(ProtocolToolFrames, MalformedAndBadActionsAndSwitches) {
  EXPECT_EQ(rejection(0x0208, u32(1) + u32(2) + u32(86400000)), kNone);
  EXPECT_EQ(rejection(0x0208, u32(1) + u32(0) + u32(0)), kBadValue);
  EXPECT_EQ(rejection(0x0208, u32(1) + u32(4) + u32(0)), kBadValue);
  EXPECT_EQ(rejection(0x0208, u32(1) + u32(1) + u32(5)), kBadValue);  // a delay with ack
  EXPECT_EQ(rejection(0x0208, u32(1) + u32(2) + u32(86400001)), kBadValue);
  EXPECT_EQ(rejection(0x0208, u32(1) + u32(2)), kMalformed);
  EXPECT_EQ(rejection(0x0209, u32(7) + "done"), kNone);
  EXPECT_EQ(rejection(0x0209, u32(7)), kBadValue);  // nothing to raise
  EXPECT_EQ(rejection(0x0209, u32(7) + std::string(65537, 't')), kMalformed);
  EXPECT_EQ(rejection(0x0209, u32(7) + "\xC3("), kMalformed);
  EXPECT_EQ(rejection(0x0209, "\1\2"), kMalformed);
  EXPECT_EQ(rejection(0x0202, u32(0x10)), kBadValue);
  EXPECT_EQ(rejection(0x0202, std::string(1, '\0')), kMalformed);
  // The rest of the range is not defined; answers sent the wrong way; header flags.
  EXPECT_EQ(rejection(0x020A, ""), WireError::kNotAvailable);
  EXPECT_EQ(rejection(0x02FF, "x"), WireError::kNotAvailable);
  EXPECT_EQ(rejection(0x8202, u32(1) + u32(1) + "x{}"), WireError::kUnknownOpcode);
  EXPECT_EQ(rejection(raw(0x0206, 42, u32(1), /*flags=*/1)), kMalformed);
  // Without --tools, everything in the range, whatever its payload.
  EXPECT_EQ(rejection(raw(0x0206, 42, "bad"), /*tools=*/false), WireError::kNotAvailable);
  EXPECT_EQ(rejection(raw(0x0208, 42, u32(1) + u32(1) + u32(0)), false), WireError::kNotAvailable);
}

TEST(ProtocolToolFrames, AClientRefusesBrokenServerFrames) {
  const auto bad = [](uint16_t op, const std::string& p) {
    const auto r = parse_server_payload(op, std::span(reinterpret_cast<const uint8_t*>(p.data()), p.size()));
    return !r.ok() && wire_error_of(r.error()) == WireError::kMalformed;
  };
  EXPECT_TRUE(bad(0x8202, u32(1) + u32(0) + "{}"));          // no name
  EXPECT_TRUE(bad(0x8202, u32(1) + u32(3) + "a b{}"));       // not a tool name
  EXPECT_TRUE(bad(0x8202, u32(1) + u32(9) + "x{}"));         // name past the end
  EXPECT_TRUE(bad(0x8202, u32(1) + u32(1) + "x[]"));         // arguments not an object
  EXPECT_TRUE(bad(0x8202, u32(1) + u32(1) + "x{"));          // not JSON
  EXPECT_FALSE(bad(0x8202, u32(1) + u32(1) + "x{}"));
  EXPECT_TRUE(bad(0x8201, u32(65)));
  EXPECT_TRUE(bad(0x8200, "x"));
  EXPECT_TRUE(bad(0x8206, u32(1) + "x"));
  const std::string data_head = u32(1) + u32(0) + u64(0) + u64(0) + u64(0) + u64(0);
  EXPECT_FALSE(bad(0x8204, data_head + u32(0) + u32(0) + u32(2) + "ab"));
  EXPECT_TRUE(bad(0x8204, data_head + u32(0) + u32(0) + u32(3) + "ab"));  // partial past the end
  EXPECT_TRUE(bad(0x8204, data_head + u32(3) + u32(0) + u32(0)));         // closed: no read
  EXPECT_TRUE(bad(0x8205, u32(0)));
  EXPECT_TRUE(bad(0x8205, u32(5)));
  EXPECT_TRUE(bad(0x8205, u32(3) + u32(1) + u32(0) + u32(0)));  // PTY state 0 (running)
  EXPECT_TRUE(bad(0x8205, u32(3) + u32(1) + u32(1)));           // cut short
  EXPECT_TRUE(bad(0x8205, u32(4) + u32(1) + u32(6) + u32(1) + std::string(32, '\0')));
  EXPECT_TRUE(bad(0x8205, u32(1) + u32(1) + u32(0) + u32(0) + u64(0) + u32(0) + u32(2) + "x"));
  EXPECT_TRUE(bad(0x8205, u32(2) + u32(1) + u64(0) + u64(0) + u32(5) + "ab"));  // raw past the end
}

TEST(ProtocolToolFrames, DeclarationsReadBack) {
  const auto tools = parse_tool_declarations(
      R"([{"name":"a","description":"d","parameters":{"type":"object","properties":{}}},)"
      R"({"name":"b","parameters":null}])");
  ASSERT_TRUE(tools.ok()) << tools.error().message;
  ASSERT_EQ(tools->size(), 2u);
  EXPECT_EQ((*tools)[0], (DeclaredTool{"a", "d", R"({"properties":{},"type":"object"})"}));
  EXPECT_EQ((*tools)[1], (DeclaredTool{"b", "", "null"}));
  // Brackets inside strings, escaped quotes included, are not nesting.
  EXPECT_EQ(json_depth(R"(["[[[[\"]]]", {"k": "{{{"}])"), 2u);
  EXPECT_EQ(json_depth("7"), 0u);
}

}  // namespace
}  // namespace infer::protocol
