// The call parser on well-formed token streams: GEMMA4_CHAT.md's call, nesting, strings that
// hold anything, numbers, several calls, and the model's own <|tool_response>.
#include "model/tool_format/call_parser.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "test/model/tool_format/call_script.h"

namespace infer {
namespace {

using json = nlohmann::json;
using namespace tool_test;  // NOLINT(google-build-using-namespace): the tests' own helpers

TEST(ToolCallParser, ParsesGemma4ChatExample) {
  const Fed fed =
      feed(tokens_of("Let me look.<|tool_call>call:read_file{path:<|\"|>notes.txt"
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
  const std::string s =
      "a{b}c[d],e:f\"g'h\\i\n\tj <|\"|> <tool_call|> <|tool_response> <turn|> é😀";
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
  const std::vector<Token> tokens = tokens_of(
      "<|tool_call>call:w{s:<|\"|>a<|tool>b<tool_response|>"
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
  const Fed fed =
      feed(tokens_of("A<|tool_call>call:a{}<tool_call|><|tool_call>call:b{x:1}<tool_call|>\nB"
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

}  // namespace
}  // namespace infer
