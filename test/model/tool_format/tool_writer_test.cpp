// The tool-format writers against GEMMA4_CHAT.md's examples, byte for byte, and their edges.
#include "model/tool_format/tool_writer.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace infer {
namespace {

using json = nlohmann::json;

std::string text_of(const Result<FormatPieces>& r) {
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? r->str() : "";
}

ToolDeclaration read_file_tool() {
  return {"read_file", "Read a file",
          json::parse(R"({"type":"object","properties":{"path":{"type":"string",
                          "description":"path"}},"required":["path"]})")};
}

TEST(ToolWriter, DeclarationIsGemma4ChatExampleByteForByte) {
  EXPECT_EQ(text_of(declaration_pieces(read_file_tool())),
            "<|tool>declaration:read_file{description:<|\"|>Read a file<|\"|>,parameters:{"
            "properties:{path:{description:<|\"|>path<|\"|>,type:<|\"|>STRING<|\"|>}},"
            "required:[<|\"|>path<|\"|>],type:<|\"|>OBJECT<|\"|>}}<tool|>");
}

TEST(ToolWriter, DeclarationMarksOnlyMarkersAsMarkers) {
  const Result<FormatPieces> r = declaration_pieces(read_file_tool());
  ASSERT_TRUE(r.ok());
  std::vector<std::string> markers;
  for (const FormatPiece& p : r->pieces()) {
    if (p.marker) markers.push_back(p.text);
  }
  // <|tool>, 5 strings of two delimiters each, <tool|>.
  ASSERT_EQ(markers.size(), 12u);
  EXPECT_EQ(markers.front(), "<|tool>");
  EXPECT_EQ(markers.back(), "<tool|>");
  for (size_t i = 1; i + 1 < markers.size(); ++i) EXPECT_EQ(markers[i], "<|\"|>");
}

TEST(ToolWriter, SchemaTypesAreUpperCasedWhereverTheyAreSchemas) {
  const ToolDeclaration tool{"search", "Find", json::parse(R"({"type":"object","properties":{
        "type":{"type":"string","enum":["file","dir"]},
        "tags":{"type":"array","items":{"type":"string"}},
        "limit":{"anyOf":[{"type":"integer"},{"type":"null"}],"default":{"type":"keep"}},
        "opt":{"type":["number","null"]}}})")};
  EXPECT_EQ(text_of(declaration_pieces(tool)),
            "<|tool>declaration:search{description:<|\"|>Find<|\"|>,parameters:{properties:{"
            "limit:{anyOf:[{type:<|\"|>INTEGER<|\"|>},{type:<|\"|>NULL<|\"|>}],"
            "default:{type:<|\"|>keep<|\"|>}},"
            "opt:{type:[<|\"|>NUMBER<|\"|>,<|\"|>NULL<|\"|>]},"
            "tags:{items:{type:<|\"|>STRING<|\"|>},type:<|\"|>ARRAY<|\"|>},"
            "type:{enum:[<|\"|>file<|\"|>,<|\"|>dir<|\"|>],type:<|\"|>STRING<|\"|>}},"
            "type:<|\"|>OBJECT<|\"|>}}<tool|>");
}

TEST(ToolWriter, DeclarationWithoutParametersHasOnlyItsDescription) {
  EXPECT_EQ(text_of(declaration_pieces({"now", "", json()})),
            "<|tool>declaration:now{description:<|\"|><|\"|>}<tool|>");
}

TEST(ToolWriter, SystemTurnHoldsTheDeclarationsAfterItsText) {
  const std::vector<ToolDeclaration> tools = {read_file_tool(), {"now", "Time", json()}};
  const std::string decl = text_of(declaration_pieces(tools[0]));
  EXPECT_EQ(text_of(system_turn_pieces("Be brief.", tools)),
            "<|turn>system\nBe brief." + decl +
                "<|tool>declaration:now{description:<|\"|>Time<|\"|>}<tool|><turn|>\n");
  EXPECT_EQ(text_of(declarations_pieces(tools)),
            decl + "<|tool>declaration:now{description:<|\"|>Time<|\"|>}<tool|>");
}

TEST(ToolWriter, CallIsGemma4ChatExample) {
  EXPECT_EQ(text_of(call_pieces("read_file", json{{"path", "notes.txt"}})),
            "<|tool_call>call:read_file{path:<|\"|>notes.txt<|\"|>}<tool_call|>");
}

TEST(ToolWriter, ResponseWritesAnObjectAsItIsAndWrapsAnythingElse) {
  EXPECT_EQ(text_of(response_pieces("read_file", json{{"content", "hi"}, {"eof", true}})),
            "<|tool_response>response:read_file{content:<|\"|>hi<|\"|>,eof:true}"
            "<tool_response|>");
  EXPECT_EQ(text_of(response_pieces("count", 42)),
            "<|tool_response>response:count{value:42}<tool_response|>");
  EXPECT_EQ(text_of(response_pieces("ls", json::array({"a", 1, nullptr}))),
            "<|tool_response>response:ls{value:[<|\"|>a<|\"|>,1,null]}<tool_response|>");
  EXPECT_EQ(text_of(response_pieces("say", "done")),
            "<|tool_response>response:say{value:<|\"|>done<|\"|>}<tool_response|>");
}

TEST(ToolWriter, NumbersKeepTheirKindAndValue) {
  const json args = {{"i", -7},    {"u", std::numeric_limits<uint64_t>::max()},
                     {"f", 0.1},   {"g", 1.0},
                     {"e", 1e300}, {"nan", std::numeric_limits<double>::quiet_NaN()}};
  EXPECT_EQ(text_of(call_pieces("n", args)),
            "<|tool_call>call:n{e:1e+300,f:0.1,g:1.0,i:-7,nan:null,u:18446744073709551615}"
            "<tool_call|>");
}

TEST(ToolWriter, KeysThatCannotBeBareAreWrittenAsStrings) {
  EXPECT_EQ(text_of(call_pieces("k", json{{"a b", 1}, {"", 2}, {"x:y", 3}, {"ok-1.$_", 4}})),
            "<|tool_call>call:k{<|\"|><|\"|>:2,<|\"|>a b<|\"|>:1,ok-1.$_:4,"
            "<|\"|>x:y<|\"|>:3}<tool_call|>");
}

TEST(ToolWriter, StringsAreOneTextPieceWhateverTheySpell) {
  const std::string s = "a}b,c:\"d\"\n<|\"|><tool_call|>";
  const Result<FormatPieces> r = call_pieces("w", json{{"s", s}});
  ASSERT_TRUE(r.ok());
  const std::vector<FormatPiece>& p = r->pieces();
  ASSERT_EQ(p.size(), 7u);  // <|tool_call> "call:w{s:" <|"|> s <|"|> "}" <tool_call|>
  EXPECT_TRUE(p[2].marker);
  EXPECT_FALSE(p[3].marker);
  EXPECT_EQ(p[3].text, s);
  EXPECT_TRUE(p[4].marker);
}

TEST(ToolWriter, RefusesBadNamesNonObjectsAndDeepValues) {
  EXPECT_FALSE(call_pieces("", json::object()).ok());
  EXPECT_FALSE(call_pieces("a b", json::object()).ok());
  EXPECT_FALSE(call_pieces("a{", json::object()).ok());
  EXPECT_FALSE(call_pieces(std::string(129, 'a'), json::object()).ok());
  EXPECT_TRUE(call_pieces(std::string(128, 'a'), json::object()).ok());
  EXPECT_FALSE(call_pieces("f", json::array()).ok());
  EXPECT_FALSE(response_pieces("bad name", 1).ok());
  EXPECT_FALSE(declaration_pieces({"f", "", json::array()}).ok());

  json deep = json::object();
  for (int i = 1; i < kMaxToolValueDepth; ++i) deep = json{{"a", deep}};
  EXPECT_TRUE(call_pieces("f", deep).ok());  // kMaxToolValueDepth objects
  const Result<FormatPieces> too_deep = call_pieces("f", json{{"a", deep}});
  ASSERT_FALSE(too_deep.ok());
  EXPECT_NE(too_deep.error().message.find("deeper than 64"), std::string::npos);
}

}  // namespace
}  // namespace infer
