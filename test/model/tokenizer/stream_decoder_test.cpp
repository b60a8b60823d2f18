// StreamDecoder: ids pushed one at a time give decode()'s text, and no step ends inside a UTF-8
// sequence, on the fixture texts, golden greedy output, byte-fallback emoji and broken bytes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/tokenizer/tokenizer.h"
#include "test/model/tokenizer/tokenizer_fixtures.h"
#include "test/test_paths.h"

namespace infer {
namespace {

using nlohmann::json;

// Whether `s` is whole UTF-8: every sequence complete (what a terminal may print at once).
bool is_whole_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// Streams `ids`, checking each step's output is whole UTF-8; returns the concatenation.
std::string stream(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  StreamDecoder dec(tok);
  std::string all;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string step;
    dec.push(ids[i], step);
    EXPECT_TRUE(is_whole_utf8(step)) << "after id " << i << " (" << ids[i] << ")";
    all += step;
  }
  std::string rest;
  dec.flush(rest);
  EXPECT_TRUE(is_whole_utf8(rest));
  return all + rest;
}

std::vector<int32_t> ids_of_tokens(const Tokenizer& tok, const std::vector<std::string>& tokens) {
  std::vector<int32_t> ids;
  for (const std::string& t : tokens) {
    const auto id = tok.token_to_id(t);
    EXPECT_TRUE(id.has_value()) << t;
    if (id) ids.push_back(*id);
  }
  return ids;
}

TEST(TokenizerStreamDecoder, EqualsDecodeOnEveryFixtureText) {
  const Tokenizer* tok = test::gemma3_tokenizer();
  ASSERT_NE(tok, nullptr);
  const json cases = test::read_json(test::repo_fixtures() / "tokenizer" / "public.json");
  ASSERT_FALSE(cases.empty());
  for (const json& c : cases) {
    const auto ids = c["ids_special"].get<std::vector<int32_t>>();
    SCOPED_TRACE(c["text"].dump());
    EXPECT_EQ(stream(*tok, ids), tok->decode(ids));
  }
}

TEST(TokenizerStreamDecoder, EqualsDecodeOnGoldenGreedyTokensAndMixedText) {
  const Tokenizer* tok = test::gemma4_tokenizer();
  ASSERT_NE(tok, nullptr);
  const json golden =
      test::read_json(test::shared_fixtures() / "gemma4-text" / "e2b-vocab" / "golden.json");
  ASSERT_FALSE(golden["prompts"].empty());
  for (const json& p : golden["prompts"]) {
    const auto ids = p["greedy_tokens"].get<std::vector<int32_t>>();
    EXPECT_EQ(stream(*tok, ids), p["greedy_text"].get<std::string>());
  }
  const std::vector<int32_t> mixed = tok->encode(make_encode_bench_text(5000), true);
  EXPECT_EQ(stream(*tok, mixed), tok->decode(mixed));
}

TEST(TokenizerStreamDecoder, HoldsBackBytesUntilTheCharacterIsComplete) {
  const Tokenizer* tok = test::gemma3_tokenizer();
  ASSERT_NE(tok, nullptr);
  // U+1F600 😀 as four byte tokens, then "a".
  const std::vector<int32_t> ids =
      ids_of_tokens(*tok, {"<0xF0>", "<0x9F>", "<0x98>", "<0x80>", "a"});
  ASSERT_EQ(ids.size(), 5u);
  StreamDecoder dec(*tok);
  std::string out;
  for (int i = 0; i < 3; ++i) {
    dec.push(ids[i], out);
    EXPECT_EQ(out, "") << "after byte " << i;
  }
  dec.push(ids[3], out);
  EXPECT_EQ(out, "\U0001F600");
  dec.push(ids[4], out);
  EXPECT_EQ(out, "\U0001F600a");
  EXPECT_EQ(out, tok->decode(ids));
}

TEST(TokenizerStreamDecoder, ReplacesBrokenBytesLikeDecode) {
  const Tokenizer* tok = test::gemma3_tokenizer();
  ASSERT_NE(tok, nullptr);
  const std::vector<std::vector<std::string>> cases = {
      {"<0xE6>", "<0x97>", "a"},            // truncated, then a normal token
      {"a", "<0xFF>", "<0x41>", "b"},       // invalid lead byte: the whole run is replaced
      {"<0x9F>", "<0x98>"},                 // continuation bytes alone
      {"<0xED>", "<0xA0>", "<0x80>", "x"},  // a surrogate, which UTF-8 forbids
      {"<0xF0>", "<0x9F>"},                 // cut off at the end: flush() replaces it
  };
  for (const auto& tokens : cases) {
    const std::vector<int32_t> ids = ids_of_tokens(*tok, tokens);
    SCOPED_TRACE(::testing::PrintToString(tokens));
    EXPECT_EQ(stream(*tok, ids), tok->decode(ids));
  }
}

TEST(TokenizerStreamDecoder, StartsAfreshAfterReset) {
  const Tokenizer* tok = test::gemma3_tokenizer();
  ASSERT_NE(tok, nullptr);
  const std::vector<int32_t> ids = ids_of_tokens(*tok, {"<0xF0>", "<0x9F>"});
  StreamDecoder dec(*tok);
  std::string out;
  for (int32_t id : ids) dec.push(id, out);
  dec.reset();  // the held bytes are dropped, not replaced
  dec.push(*tok->token_to_id("a"), out);
  dec.flush(out);
  EXPECT_EQ(out, "a");
}

}  // namespace
}  // namespace infer
