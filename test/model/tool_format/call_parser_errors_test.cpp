// The call parser on broken token streams: truncated and malformed calls, limits, and random
// streams; each must end as an error, and the parser must go on with the next call.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "model/tool_format/call_parser.h"
#include "test/model/tool_format/call_script.h"

namespace infer {
namespace {

using json = nlohmann::json;
using namespace tool_test;  // NOLINT(google-build-using-namespace): the tests' own helpers

TEST(ToolCallParser, TruncatedCallsBecomeErrorsAtFlush) {
  for (const char* text : {"<|tool_call>", "<|tool_call>call:f{a:", "<|tool_call>call:f{a:<|\"|>x",
                           "<|tool_call>call:f{a:{b:[1,2"}) {
    const ToolCallError e = one_error(tokens_of(text));
    EXPECT_NE(e.what.find("generation ended inside the call"), std::string::npos) << text;
    EXPECT_EQ(e.raw, std::string_view(text).substr(kToolCallOpen.size())) << text;
  }
  EXPECT_EQ(one_error(tokens_of("<|tool_call>call:read_file{a:")).name, "read_file");
}

struct Broken {
  const char* text;  // the call body, between <|tool_call> and <tool_call|>
  const char* what;  // a part of the error's message
};

TEST(ToolCallParser, MalformedCallsBecomeErrors) {
  const Broken cases[] = {
      {"", "expected call:NAME"},
      {"read_file{}", "expected call:NAME"},
      {"call read_file{}", "expected ':' after call"},
      {"call:{}", "expected a tool name"},
      {"call:<|\"|>f<|\"|>{}", "expected a tool name"},
      {"call:f<g{}", "expected a tool name"},
      {"call:f", "expected '{' after the tool name"},
      {"call:f[]", "expected '{' after the tool name"},
      {"call:f{", "expected a key, found the end"},
      {"call:f{a}", "expected ':' after a key"},
      {"call:f{a:}", "expected a value"},
      {"call:f{a:1 b:2}", "expected ',' or '}'"},
      {"call:f{a:1,}", "expected a key"},
      {"call:f{,}", "expected a key"},
      {"call:f{a:1,a:2}", "appears twice"},
      {"call:f{:1}", "expected a key"},
      {"call:f{a:[1 2]}", "expected ',' or ']'"},
      {"call:f{a:[1,]}", "expected a value"},
      {"call:f{a:[}", "expected a value"},
      {"call:f{a:{}]}", "expected ',' or '}'"},
      {"call:f{a:1}}", "expected the end of the call"},
      {"call:f{a:1}x", "expected the end of the call"},
      {"call:f{}{}", "expected the end of the call"},
      {"call:f{a:notes.txt}", "is not a number, true, false or null"},
      {"call:f{a:True}", "is not a number"},
      {"call:f{a:01}", "is not a number"},
      {"call:f{a:1.}", "is not a number"},
      {"call:f{a:.5}", "is not a number"},
      {"call:f{a:+1}", "is not a number"},
      {"call:f{a:1e}", "is not a number"},
      {"call:f{a:-}", "is not a number"},
      {"call:f{a:1e999}", "is not a number"},
      {"call:f{a:0x10}", "is not a number"},
      {"call:f{a:<|\"|>x}", "ended inside a string"},
      {"call:f{a<|\"|>x<|\"|>:1}", "expected ':' after a key"},
      {"call:f{a:<|\"|>x<|\"|><|\"|>y<|\"|>}", "expected ',' or '}'"},
      {"call:f{a:1<|tool>}", "<|tool> inside a call"},
      {"call:f{a:1<tool|>}", "<tool|> inside a call"},
      {"call:f{a:1<tool_response|>}", "<tool_response|> inside a call"},
  };
  for (const Broken& c : cases) {
    const std::string text = std::string("<|tool_call>") + c.text + "<tool_call|>after";
    const Fed fed = feed(tokens_of(text));
    ASSERT_EQ(fed.outcomes.size(), 1u) << text;
    const auto* e = std::get_if<ToolCallError>(&fed.outcomes[0]);
    ASSERT_NE(e, nullptr) << text;
    EXPECT_NE(e->what.find(c.what), std::string::npos) << text << " -> " << e->what;
    EXPECT_EQ(fed.passed, "after") << text;  // the parser is back outside
  }
}

TEST(ToolCallParser, ErrorsSayWhereAndKeepTheName) {
  const ToolCallError e = one_error(tokens_of("<|tool_call>call:grep{n:1,x:y}<tool_call|>"));
  EXPECT_EQ(e.name, "grep");
  EXPECT_EQ(e.raw, "call:grep{n:1,x:y}");
  EXPECT_EQ(e.raw_bytes, e.raw.size());
  EXPECT_NE(e.what.find("at byte 16 of the call"), std::string::npos) << e.what;
  // Offsets count the <|"|> spellings between strings.
  const ToolCallError s =
      one_error(tokens_of("<|tool_call>call:f{a:<|\"|>xy<|\"|>,b:zz}<tool_call|>"));
  EXPECT_NE(s.what.find("at byte 24 of the call"), std::string::npos) << s.what;
}

TEST(ToolCallParser, InvalidUtf8InStringsOrKeysIsAnError) {
  std::vector<Token> t = tokens_of("<|tool_call>call:f{a:<|\"|>");
  t.push_back({kText, "\xC3"});
  t = t + tokens_of("<|\"|>}<tool_call|>");
  EXPECT_NE(one_error(t).what.find("not valid UTF-8"), std::string::npos);
  t = tokens_of("<|tool_call>call:f{");
  t.push_back({kText, "k\xFF"});
  t = t + tokens_of(":1}<tool_call|>");
  EXPECT_NE(one_error(t).what.find("not valid UTF-8"), std::string::npos);
  // Messages quote what they found in printable ASCII, whatever bytes it had.
  t = tokens_of("<|tool_call>call:f{a:");
  t.push_back({kText, "\xC3\xA9\xFF\n"});
  t = t + tokens_of("}<tool_call|>");
  const std::string what = one_error(t).what;
  EXPECT_NE(what.find("\"???\" is not a number"), std::string::npos) << what;
}

TEST(ToolCallParser, ANewCallBeforeTheEndIsAnErrorAndStartsOver) {
  const Fed fed = feed(tokens_of("<|tool_call>call:a{x:<|tool_call>call:b{y:1}<tool_call|>"));
  ASSERT_EQ(fed.outcomes.size(), 2u);
  EXPECT_NE(std::get<ToolCallError>(fed.outcomes[0]).what.find("a new <|tool_call>"),
            std::string::npos);
  EXPECT_EQ(std::get<ToolCallError>(fed.outcomes[0]).name, "a");
  EXPECT_EQ(std::get<ToolCall>(fed.outcomes[1]).arguments, json({{"y", 1}}));
}

TEST(ToolCallParser, LimitsEndTheCallAndTheNextOneStillParses) {
  const std::string good = "<|tool_call>call:ok{v:1}<tool_call|>";
  ToolCallLimits tokens_limit;
  tokens_limit.max_call_tokens = 20;
  ToolCallLimits bytes_limit;
  bytes_limit.max_call_bytes = 64;
  ToolCallLimits depth_limit;
  depth_limit.max_depth = 3;
  struct Case {
    ToolCallLimits limits;
    std::string text;
    const char* what;
  } cases[] = {
      {tokens_limit, "<|tool_call>call:f{s:<|\"|>" + std::string(200, 'x') + "<|\"|>}<tool_call|>",
       "longer than 20 tokens"},
      {bytes_limit, "<|tool_call>call:f{s:<|\"|>" + std::string(200, 'x') + "<|\"|>}<tool_call|>",
       "longer than 64 bytes"},
      {bytes_limit,
       "<|tool_call>call:f{s:" + std::string(30, ' ') + "<|\"|><|\"|><|\"|><|\"|>" +
           "<|\"|><|\"|><|\"|><|\"|>}<tool_call|>",
       "longer than 64 bytes"},
      {depth_limit, "<|tool_call>call:f{a:{b:[{}]}}<tool_call|>", "nested deeper than 3"},
      {depth_limit, "<|tool_call>call:f{a:[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]}<tool_call|>",
       "nested deeper than 3"},
  };
  for (const Case& c : cases) {
    const Fed fed = feed(tokens_of(c.text + "mid" + good), c.limits);
    ASSERT_EQ(fed.outcomes.size(), 2u) << c.what;
    const auto* e = std::get_if<ToolCallError>(&fed.outcomes[0]);
    ASSERT_NE(e, nullptr) << c.what;
    EXPECT_NE(e->what.find(c.what), std::string::npos) << e->what;
    EXPECT_EQ(e->name, "f");
    EXPECT_EQ(fed.passed, "mid") << c.what;
    EXPECT_TRUE(std::holds_alternative<ToolCall>(fed.outcomes[1])) << c.what;
  }
  // Depth 3 itself is allowed.
  const Fed ok = feed(tokens_of("<|tool_call>call:f{a:{b:[1]}}<tool_call|>"), depth_limit);
  ASSERT_EQ(ok.outcomes.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<ToolCall>(ok.outcomes[0]));
}

TEST(ToolCallParser, AnOverLimitCallCutOffByTheEndOfGenerationIsReportedOnce) {
  ToolCallLimits limits;
  limits.max_call_tokens = 8;
  const Fed fed = feed(tokens_of("<|tool_call>call:f{s:<|\"|>" + std::string(100, 'x')), limits);
  ASSERT_EQ(fed.outcomes.size(), 1u);
  EXPECT_NE(std::get<ToolCallError>(fed.outcomes[0]).what.find("longer than 8 tokens"),
            std::string::npos);
}

TEST(ToolCallParser, RawTextIsCutAtTheLimitOnACharacterBoundary) {
  ToolCallLimits limits;
  limits.max_raw_bytes = 20;
  const std::string body = "call:f{s:<|\"|>" + std::string(5, 'a') + "ééééé";
  const ToolCallError e = one_error(tokens_of("<|tool_call>" + body), limits);
  EXPECT_EQ(e.raw_bytes, body.size());
  EXPECT_EQ(e.raw, body.substr(0, 19));  // byte 20 would split an é
}

TEST(ToolCallParser, RandomTokenStreamsNeverCrashAndAlwaysEndOutside) {
  // The fuzz target (test/fuzz/tool_call_fuzz.cpp) goes much further; this keeps a quick check
  // of the same property in the unit suite.
  std::mt19937 rng(7);
  const std::string alphabet = "{}[]:, \n\"call:f-1.5e+3truenullx<|>";
  ToolCallLimits limits;
  limits.max_call_tokens = 64;
  limits.max_depth = 4;
  for (int round = 0; round < 2000; ++round) {
    ToolCallParser parser(kIds, limits);
    const int n = static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) {
      const uint32_t r = rng() % 16;
      if (r < 7) {
        parser.push(46 + static_cast<int32_t>(r), "");
      } else {
        std::string piece(1 + rng() % 3, ' ');
        for (char& c : piece) c = alphabet[rng() % alphabet.size()];
        ToolCallStep s = parser.push(kText, piece);
        if (s.finished) {
          if (auto* call = std::get_if<ToolCall>(&*s.finished)) {
            ASSERT_TRUE(call->arguments.is_object());
            ASSERT_TRUE(is_tool_name(call->name));
          } else {
            ASSERT_FALSE(std::get<ToolCallError>(*s.finished).what.empty());
          }
        }
      }
    }
    (void)parser.flush();
    ASSERT_FALSE(parser.in_call());
    EXPECT_TRUE(parser.push(kText, "x").pass_through);
  }
}

}  // namespace
}  // namespace infer
