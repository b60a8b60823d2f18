// The call parser on token streams built by hand (ids as in Gemma 4's tokenizer, text cut into
// small pieces the way a BPE would): calls, strings, numbers, several calls, and every way a
// call can be broken.
#include "model/tool_format/call_parser.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace infer {
namespace {

using json = nlohmann::json;

constexpr ToolTokens kIds{46, 47, 48, 49, 50, 51, 52};
constexpr int32_t kText = 1000;  // any ordinary token

struct Token {
  int32_t id;
  std::string piece;
};

// `text` in the format's spelling: the tool markers become their ids, the rest ordinary tokens
// of at most `piece_bytes` bytes each.
std::vector<Token> tokens_of(std::string_view text, size_t piece_bytes = 3) {
  const std::pair<std::string_view, int32_t> markers[] = {
      {kToolOpen, kIds.tool_open},         {kToolClose, kIds.tool_close},
      {kToolCallOpen, kIds.call_open},     {kToolCallClose, kIds.call_close},
      {kToolResponseOpen, kIds.response_open}, {kToolResponseClose, kIds.response_close},
      {kToolString, kIds.string_delim}};
  std::vector<Token> out;
  size_t i = 0;
  while (i < text.size()) {
    bool matched = false;
    for (const auto& [spelling, id] : markers) {
      if (text.substr(i, spelling.size()) == spelling) {
        out.push_back({id, std::string(spelling)});
        i += spelling.size();
        matched = true;
        break;
      }
    }
    if (matched) continue;
    size_t n = 1;
    while (n < piece_bytes && i + n < text.size() && text[i + n] != '<') ++n;
    out.push_back({kText, std::string(text.substr(i, n))});
    i += n;
  }
  return out;
}

// Ordinary tokens only, even where the text spells a marker.
std::vector<Token> text_tokens(std::string_view text) {
  std::vector<Token> out;
  for (size_t i = 0; i < text.size(); i += 2) out.push_back({kText, std::string(text.substr(i, 2))});
  return out;
}

std::vector<Token> operator+(std::vector<Token> a, const std::vector<Token>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct Fed {
  std::vector<ToolCallOutcome> outcomes;
  std::string passed;  // the pieces passed through
  int stops = 0;
};

Fed feed(const std::vector<Token>& tokens, ToolCallLimits limits = {}, bool flush = true) {
  ToolCallParser parser(kIds, limits);
  Fed fed;
  for (const Token& t : tokens) {
    ToolCallStep s = parser.push(t.id, t.piece);
    if (s.pass_through) fed.passed += t.piece;
    if (s.finished) fed.outcomes.push_back(std::move(*s.finished));
    fed.stops += s.stop;
  }
  if (flush) {
    if (auto last = parser.flush()) fed.outcomes.push_back(std::move(*last));
    EXPECT_FALSE(parser.in_call());
  }
  return fed;
}

// The one call in `text`, which must parse.
ToolCall one_call(std::string_view text) {
  const Fed fed = feed(tokens_of(text));
  EXPECT_EQ(fed.outcomes.size(), 1u) << text;
  if (fed.outcomes.size() != 1) return {};
  if (const auto* e = std::get_if<ToolCallError>(&fed.outcomes[0])) {
    ADD_FAILURE() << text << ": " << e->what;
    return {};
  }
  return std::get<ToolCall>(fed.outcomes[0]);
}

// The one error in the stream, which must be an error.
ToolCallError one_error(const std::vector<Token>& tokens, ToolCallLimits limits = {}) {
  const Fed fed = feed(tokens, limits);
  EXPECT_EQ(fed.outcomes.size(), 1u);
  if (fed.outcomes.size() != 1 || !std::holds_alternative<ToolCallError>(fed.outcomes[0])) {
    ADD_FAILURE() << "expected one error";
    return {};
  }
  return std::get<ToolCallError>(fed.outcomes[0]);
}

TEST(ToolCallParser, ParsesGemma4ChatExample) {
  const Fed fed = feed(tokens_of("Let me look.<|tool_call>call:read_file{path:<|\"|>notes.txt"
                                 "<|\"|>}<tool_call|>"));
  EXPECT_EQ(fed.passed, "Let me look.");
  ASSERT_EQ(fed.outcomes.size(), 1u);
  const ToolCall& call = std::get<ToolCall>(fed.outcomes[0]);
  EXPECT_EQ(call.name, "read_file");
  EXPECT_EQ(call.arguments, json({{"path", "notes.txt"}}));
}

TEST(ToolCallParser, ReadsNestedObjectsAndArrays) {
  const ToolCall call = one_call(
      "<|tool_call>call:edit{ops:[{at:1,del:[2,[3,{}]]},[],{x:{y:{z:[<|\"|>deep<|\"|>]}}}],"
      "e:{}}<tool_call|>");
  EXPECT_EQ(call.arguments, json::parse(R"({"ops":[{"at":1,"del":[2,[3,{}]]},[],
                                            {"x":{"y":{"z":["deep"]}}}],"e":{}})"));
}

TEST(ToolCallParser, StringsHoldAnything) {
  const std::string s = "a{b}c[d],e:f\"g'h\\i\n\tj <|\"|> <tool_call|> <|tool_response> <turn|> é😀";
  // Inside a string, text that spells a marker is text: only the <|"|> id ends it.
  const std::vector<Token> tokens = tokens_of("<|tool_call>call:w{s:<|\"|>") + text_tokens(s) +
                                    tokens_of("<|\"|>,t:<|\"|><|\"|>}<tool_call|>");
  const Fed fed = feed(tokens);
  ASSERT_EQ(fed.outcomes.size(), 1u);
  const auto* call = std::get_if<ToolCall>(&fed.outcomes[0]);
  ASSERT_NE(call, nullptr) << std::get<ToolCallError>(fed.outcomes[0]).what;
  EXPECT_EQ(call->arguments, json({{"s", s}, {"t", ""}}));
}

TEST(ToolCallParser, MarkerTokensOtherThanTheEndsAreTextInsideAString) {
  const std::vector<Token> tokens = tokens_of("<|tool_call>call:w{s:<|\"|>a<|tool>b<tool_response|>"
                                              "c<tool|><|\"|>}<tool_call|>");
  const Fed fed = feed(tokens);
  ASSERT_EQ(fed.outcomes.size(), 1u);
  ASSERT_TRUE(std::holds_alternative<ToolCall>(fed.outcomes[0]));
  EXPECT_EQ(std::get<ToolCall>(fed.outcomes[0]).arguments,
            json({{"s", "a<|tool>b<tool_response|>c<tool|>"}}));
}

TEST(ToolCallParser, ReadsNumbersBooleansAndNull) {
  const ToolCall call = one_call(
      "<|tool_call>call:n{a:0,b:-12,c:3.25,d:-0.5e-3,e:6E+2,f:1e300,g:9223372036854775807,"
      "h:18446744073709551615,i:-9223372036854775808,j:true,k:false,l:null,m:123456789012345678901}"
      "<tool_call|>");
  const json& a = call.arguments;
  EXPECT_EQ(a["a"], 0);
  EXPECT_EQ(a["b"], -12);
  EXPECT_TRUE(a["b"].is_number_integer());
  EXPECT_EQ(a["c"], 3.25);
  EXPECT_EQ(a["d"], -0.5e-3);
  EXPECT_EQ(a["e"], 600.0);
  EXPECT_TRUE(a["e"].is_number_float());
  EXPECT_EQ(a["f"], 1e300);
  EXPECT_EQ(a["g"], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(a["h"], std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(a["i"], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(a["j"], true);
  EXPECT_EQ(a["k"], false);
  EXPECT_TRUE(a["l"].is_null());
  EXPECT_EQ(a["m"], 123456789012345678901.0);  // past uint64: a double, as JSON parsers do
}

TEST(ToolCallParser, AcceptsWhitespaceAndQuotedKeys) {
  const ToolCall call = one_call(
      "<|tool_call> call : f {\n  a : 1 ,\n  <|\"|>b c<|\"|> : [ 1 , 2 ] ,\tx.y-z$:null\n}\n"
      "<tool_call|>");
  EXPECT_EQ(call.name, "f");
  EXPECT_EQ(call.arguments, json({{"a", 1}, {"b c", {1, 2}}, {"x.y-z$", nullptr}}));
}

TEST(ToolCallParser, SeveralCallsInARowAndTextAround) {
  const Fed fed = feed(tokens_of(
      "A<|tool_call>call:a{}<tool_call|><|tool_call>call:b{x:1}<tool_call|>\nB"
      "<|tool_call>call:c{y:<|\"|>z<|\"|>}<tool_call|>C"));
  EXPECT_EQ(fed.passed, "A\nBC");
  ASSERT_EQ(fed.outcomes.size(), 3u);
  EXPECT_EQ(std::get<ToolCall>(fed.outcomes[0]).name, "a");
  EXPECT_EQ(std::get<ToolCall>(fed.outcomes[0]).arguments, json::object());
  EXPECT_EQ(std::get<ToolCall>(fed.outcomes[1]).arguments, json({{"x", 1}}));
  EXPECT_EQ(std::get<ToolCall>(fed.outcomes[2]).arguments, json({{"y", "z"}}));
  EXPECT_EQ(fed.stops, 0);
}

TEST(ToolCallParser, TheModelsOwnToolResponseStopsTheStep) {
  // After a call.
  Fed fed = feed(tokens_of("<|tool_call>call:a{}<tool_call|><|tool_response>"));
  ASSERT_EQ(fed.outcomes.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<ToolCall>(fed.outcomes[0]));
  EXPECT_EQ(fed.stops, 1);
  // In place of <tool_call|>: it ends the call too.
  fed = feed(tokens_of("<|tool_call>call:a{x:2}<|tool_response>response:a{"));
  ASSERT_EQ(fed.outcomes.size(), 1u);
  EXPECT_EQ(std::get<ToolCall>(fed.outcomes[0]).arguments, json({{"x", 2}}));
  EXPECT_EQ(fed.stops, 1);
  EXPECT_EQ(fed.passed, "response:a{");  // the caller stops at the stop; the parser goes on
}

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
  const ToolCallError s = one_error(tokens_of("<|tool_call>call:f{a:<|\"|>xy<|\"|>,b:zz}<tool_call|>"));
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
      {bytes_limit, "<|tool_call>call:f{s:" + std::string(30, ' ') + "<|\"|><|\"|><|\"|><|\"|>" +
           "<|\"|><|\"|><|\"|><|\"|>}<tool_call|>", "longer than 64 bytes"},
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
