// Tokenizer on small hand-written tokenizer.json files: both merge forms, merge order, unk,
// ignore_merges, the Split behaviours, added-token flags, decoders, templates, and malformed
// files giving a clear Error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/tokenizer/tokenizer.h"

namespace infer {
namespace {

using nlohmann::json;

// A tiny BPE over a, b, c, -, space: no normalizer, pre-tokenizer, post-processor or decoder.
json tiny() {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"a", 2},  {"b", 3},   {"c", 4},   {"-", 5},  {" ", 6},
                {"ab", 7},    {"abc", 8}, {"a-", 9}, {"-b", 10}, {"--", 11}, {"bc", 12}};
  return json{{"version", "1.0"},
              {"added_tokens", json::array()},
              {"normalizer", nullptr},
              {"pre_tokenizer", nullptr},
              {"post_processor", nullptr},
              {"decoder", nullptr},
              {"model",
               {{"type", "BPE"},
                {"unk_token", "<unk>"},
                {"fuse_unk", true},
                {"byte_fallback", false},
                {"vocab", vocab},
                {"merges", json::array({"a b", "ab c"})}}}};
}

Tokenizer make(const json& j) {
  Result<Tokenizer> r = Tokenizer::parse(j.dump());
  EXPECT_TRUE(r.ok()) << r.error().message;
  if (!r.ok()) std::abort();  // the test cannot go on; the message is above
  return std::move(r).value();
}

std::vector<std::string> tokens(const Tokenizer& tok, std::string_view text) {
  std::vector<std::string> out;
  for (int32_t id : tok.encode(text, false)) out.emplace_back(tok.id_to_token(id));
  return out;
}

using Tokens = std::vector<std::string>;

// The ids text can produce: the BPE vocabulary and non-special added tokens, not the special
// ones (a multimodal placeholder past the text model's vocabulary, like Gemma 4's
// <image_soft_token>, must not fail the check).
TEST(TokenizerJson, TextVocabularyLeavesOutSpecialAddedTokens) {
  json j = tiny();  // ids 0..12
  EXPECT_EQ(make(j).text_vocab_size(), 13);
  j["added_tokens"] = json::array(
      {{{"id", 13}, {"content", "<image>"}, {"special", true}, {"single_word", false},
        {"lstrip", false}, {"rstrip", false}, {"normalized", false}}});
  const Tokenizer with_special = make(j);
  EXPECT_EQ(with_special.vocab_size(), 14);
  EXPECT_EQ(with_special.text_vocab_size(), 13);
  EXPECT_TRUE(with_special.check_fits(13, "tokenizer.json").ok());
  j["added_tokens"].push_back({{"id", 14}, {"content", "<extra>"}, {"special", false},
                               {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                               {"normalized", false}});
  const Tokenizer with_text = make(j);
  EXPECT_EQ(with_text.text_vocab_size(), 15);
  const Result<void> r = with_text.check_fits(13, "dir/tokenizer.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kShape);
  EXPECT_EQ(r.error().message,
            "dir/tokenizer.json: the tokenizer's text ids go up to 14, the model's vocab_size is "
            "13 (a tokenizer.json of another model?)");
  EXPECT_TRUE(with_text.check_fits(15, "tokenizer.json").ok());
}

TEST(TokenizerJson, ReadsMergesInStringAndPairForm) {
  json pairs = tiny();
  pairs["model"]["merges"] = json::array({json::array({"a", "b"}), json::array({"ab", "c"})});
  EXPECT_EQ(tokens(make(tiny()), "abcab"), (Tokens{"abc", "ab"}));
  EXPECT_EQ(tokens(make(pairs), "abcab"), (Tokens{"abc", "ab"}));
}

TEST(TokenizerJson, MergesLowestRankFirstAndLeftmostOnTies) {
  json j = tiny();
  j["model"]["merges"] = json::array({"b c", "a b", "- -"});
  EXPECT_EQ(tokens(make(j), "abc"), (Tokens{"a", "bc"}));  // "b c" outranks "a b"
  EXPECT_EQ(tokens(make(j), "---"), (Tokens{"--", "-"}));
}

TEST(TokenizerJson, MapsUnknownCharactersToUnkOrDropsThem) {
  json j = tiny();
  EXPECT_EQ(tokens(make(j), "axyb"), (Tokens{"a", "<unk>", "b"}));  // fused
  j["model"]["fuse_unk"] = false;
  EXPECT_EQ(tokens(make(j), "axyb"), (Tokens{"a", "<unk>", "<unk>", "b"}));
  j["model"]["unk_token"] = nullptr;  // dropped, so "a" and "b" meet and merge (as HF)
  EXPECT_EQ(tokens(make(j), "axyb"), (Tokens{"ab"}));
}

TEST(TokenizerJson, IgnoreMergesTakesWholeWordsFromTheVocab) {
  json j = tiny();
  j["model"]["merges"] = json::array();
  EXPECT_EQ(tokens(make(j), "abc"), (Tokens{"a", "b", "c"}));
  j["model"]["ignore_merges"] = true;
  EXPECT_EQ(tokens(make(j), "abc"), (Tokens{"abc"}));
}

TEST(TokenizerJson, SplitsWithEachDelimiterBehaviour) {
  json j = tiny();
  j["model"]["merges"] = json::array({"a -", "- b", "- -"});
  // "a--b" splits into "a" "-" "-" "b"; a match merges only into a non-match neighbour.
  const std::vector<std::pair<std::string, Tokens>> cases = {
      {"Removed", {"a", "b"}},
      {"Isolated", {"a", "-", "-", "b"}},
      {"MergedWithPrevious", {"a-", "-", "b"}},
      {"MergedWithNext", {"a", "-", "-b"}},
      {"Contiguous", {"a", "--", "b"}},
  };
  for (const auto& [behavior, want] : cases) {
    SCOPED_TRACE(behavior);
    j["pre_tokenizer"] = {{"type", "Split"},
                          {"pattern", {{"String", "-"}}},
                          {"behavior", behavior},
                          {"invert", false}};
    EXPECT_EQ(tokens(make(j), "a--b"), want);
  }
}

TEST(TokenizerJson, RunsSequencesOfNormalizersAndPreTokenizers) {
  json j = tiny();
  j["normalizer"] = {
      {"type", "Sequence"},
      {"normalizers",
       json::array({{{"type", "Replace"}, {"pattern", {{"String", "x"}}}, {"content", "-"}},
                    {{"type", "Prepend"}, {"prepend", "a"}}})}};
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers", json::array({{{"type", "Split"},
                                                        {"pattern", {{"String", "-"}}},
                                                        {"behavior", "Isolated"},
                                                        {"invert", false}}})}};
  EXPECT_EQ(tokens(make(j), "bxab"), (Tokens{"ab", "-", "ab"}));
}

json with_added(json j, json added) {
  for (json& a : added) {
    a.emplace("special", false);
    a.emplace("single_word", false);
    a.emplace("lstrip", false);
    a.emplace("rstrip", false);
    a.emplace("normalized", false);
    j["model"]["vocab"][a["content"].get<std::string>()] = a["id"];
  }
  j["added_tokens"] = added;
  return j;
}

TEST(TokenizerJson, MatchesAddedTokensLongestFirstInRawText) {
  const json j = with_added(
      tiny(), json::array({{{"id", 20}, {"content", "<x>"}}, {{"id", 21}, {"content", "<x>y"}}}));
  EXPECT_EQ(tokens(make(j), "a<x>yb<x>"), (Tokens{"a", "<x>y", "b", "<x>"}));
}

TEST(TokenizerJson, AppliesLstripRstripAndSingleWord) {
  const json j = with_added(tiny(), json::array({
                                        {{"id", 20}, {"content", "<l>"}, {"lstrip", true}},
                                        {{"id", 21}, {"content", "<r>"}, {"rstrip", true}},
                                        {{"id", 22}, {"content", "cab"}, {"single_word", true}},
                                    }));
  const Tokenizer tok = make(j);
  EXPECT_EQ(tokens(tok, "a  <l>b"), (Tokens{"a", "<l>", "b"}));
  EXPECT_EQ(tokens(tok, "a<r>  b"), (Tokens{"a", "<r>", "b"}));
  EXPECT_EQ(tokens(tok, "a cab b"), (Tokens{"a", " ", "cab", " ", "b"}));
  EXPECT_EQ(tokens(tok, "acab"), (Tokens{"a", "c", "ab"}));  // inside a word: not matched
}

TEST(TokenizerJson, MatchesNormalizedAddedTokensAfterNormalization) {
  json j =
      with_added(tiny(), json::array({{{"id", 20}, {"content", "a b"}, {"normalized", true}}}));
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "-"}};
  EXPECT_EQ(tokens(make(j), "ca b"), (Tokens{"c", "a b"}));
  EXPECT_EQ(make(j).token_to_id("a b"), 20);
}

TEST(TokenizerJson, AddsTemplateTokensAroundTheText) {
  json j = tiny();
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                              {{"SpecialToken", {{"id", "<unk>"}, {"type_id", 0}}}}})},
      {"pair", json::array()},
      {"special_tokens",
       {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}},
        {"<unk>", {{"id", "<unk>"}, {"ids", {0}}, {"tokens", {"<unk>"}}}}}}};
  const Tokenizer tok = make(j);
  EXPECT_EQ(tok.encode("ab", true), (std::vector<int32_t>{1, 7, 0}));
  EXPECT_EQ(tok.encode("ab", false), (std::vector<int32_t>{7}));
  EXPECT_EQ(tok.bos_id(), 1);
}

TEST(TokenizerJson, DecodesWithStripAndWithoutDecoder) {
  json j = tiny();
  j["model"]["vocab"]["▁a"] = 30;
  j["model"]["vocab"]["▁b"] = 31;
  EXPECT_EQ(make(j).decode(std::vector<int32_t>{30, 2, 31}), "▁a a ▁b");  // joined with " "
  j["decoder"] = {
      {"type", "Sequence"},
      {"decoders",
       json::array({{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                    {{"type", "ByteFallback"}},
                    {{"type", "Fuse"}},
                    {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
  const Tokenizer tok = make(j);
  const std::vector<int32_t> ids = {30, 2, 31};
  EXPECT_EQ(tok.decode(ids), "aa b");
  StreamDecoder dec(tok);
  std::string out;
  for (int32_t id : ids) dec.push(id, out);
  dec.flush(out);
  EXPECT_EQ(out, "aa b");
}

// Each malformed file must give an Error whose message names the problem.
TEST(TokenizerJson, RejectsMalformedFilesWithClearErrors) {
  struct Case {
    std::string name;
    std::string text;
    std::string expect_in_message;
  };
  std::vector<Case> cases;
  const auto edit = [&](std::string name, auto change, std::string expect) {
    json j = tiny();
    change(j);
    cases.push_back({std::move(name), j.dump(), std::move(expect)});
  };
  cases.push_back({"not json", "{\"model\": ", "not valid JSON"});
  cases.push_back({"array root", "[1, 2]", "not a JSON object"});
  edit(
      "no model", [](json& j) { j.erase("model"); }, "\"model\" is missing");
  edit(
      "model not object", [](json& j) { j["model"] = 3; }, "\"model\"");
  edit(
      "unigram", [](json& j) { j["model"]["type"] = "Unigram"; }, "Unigram");
  edit(
      "no vocab", [](json& j) { j["model"].erase("vocab"); }, "vocab");
  edit(
      "vocab list", [](json& j) { j["model"]["vocab"] = json::array({"a"}); }, "vocab");
  edit(
      "vocab id string", [](json& j) { j["model"]["vocab"]["a"] = "2"; }, "not a token id");
  edit(
      "vocab id negative", [](json& j) { j["model"]["vocab"]["a"] = -1; }, "not a token id");
  edit(
      "vocab id huge", [](json& j) { j["model"]["vocab"]["a"] = 1LL << 40; }, "not a token id");
  edit(
      "vocab id twice", [](json& j) { j["model"]["vocab"]["zz"] = 2; }, "already the id");
  edit(
      "merges object", [](json& j) { j["model"]["merges"] = json::object(); }, "merges");
  edit(
      "merge no space", [](json& j) { j["model"]["merges"][0] = "ab"; }, "merges[0]");
  edit(
      "merge number", [](json& j) { j["model"]["merges"][1] = 5; }, "merges[1]");
  edit(
      "merge triple",
      [](json& j) {
        j["model"]["merges"][0] = {"a", "b", "c"};
      },
      "merges[0]");
  edit(
      "merge unknown", [](json& j) { j["model"]["merges"][0] = "a q"; }, "\"q\" is not in");
  edit(
      "merge result unknown", [](json& j) { j["model"]["merges"][0] = "c a"; }, "\"ca\" is not in");
  edit(
      "added no content",
      [](json& j) {
        j["added_tokens"] = {{{"id", 1}}};
      },
      "content");
  edit(
      "added bad id",
      [](json& j) {
        j["added_tokens"] = {{{"id", "x"}, {"content", "q"}}};
      },
      "added_tokens[0].id");
  edit(
      "normalizer NFC",
      [](json& j) {
        j["normalizer"] = {{"type", "NFC"}};
      },
      "NFC");
  edit(
      "regex split",
      [](json& j) {
        j["pre_tokenizer"] = {
            {"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}}, {"behavior", "Isolated"}};
      },
      "Regex");
  edit(
      "bad behavior",
      [](json& j) {
        j["pre_tokenizer"] = {
            {"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Sideways"}};
      },
      "Sideways");
  edit(
      "decoder unknown",
      [](json& j) {
        j["decoder"] = {{"type", "WordPiece"}};
      },
      "WordPiece");
  edit(
      "decoder no type", [](json& j) { j["decoder"] = json::object(); }, "\"type\"");
  edit(
      "template unknown token",
      [](json& j) {
        j["post_processor"] = {
            {"type", "TemplateProcessing"},
            {"single", json::array({{{"SpecialToken", {{"id", "<q>"}, {"type_id", 0}}}}})},
            {"special_tokens", json::object()}};
      },
      "<q>");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<Tokenizer> r = Tokenizer::parse(c.text, "test.json");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find(c.expect_in_message), std::string::npos) << r.error().message;
    EXPECT_EQ(r.error().message.rfind("test.json: ", 0), 0u) << r.error().message;
  }
}

// Every truncation of a valid file is an Error, and corrupted bytes never crash the parser.
TEST(TokenizerJson, SurvivesTruncatedAndCorruptedFiles) {
  const std::string text =
      with_added(tiny(), json::array({{{"id", 20}, {"content", "<x>"}}})).dump();
  for (size_t n = 0; n < text.size(); ++n) {
    EXPECT_FALSE(Tokenizer::parse(text.substr(0, n)).ok()) << "truncated at " << n;
  }
  uint32_t state = 12345;  // fixed seed: the same corruptions every run
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bad = text;
    for (int k = 0; k < 3; ++k) {
      state = state * 1664525u + 1013904223u;
      bad[(state >> 8) % bad.size()] = static_cast<char>(state >> 24);
    }
    Result<Tokenizer> r = Tokenizer::parse(bad);
    if (r.ok()) (void)r->encode("ab<x>c", true);  // a file that still parses must still encode
  }
}

TEST(TokenizerJson, ReportsAMissingFileAsNotFound) {
  Result<Tokenizer> r = Tokenizer::load("/nonexistent/tokenizer.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
}

}  // namespace
}  // namespace infer
