// Builds the demo tokenizer.json in the layout of Gemma's (see the e2b-vocab fixture).
#include "model/synth/demo_tokenizer.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <unordered_map>

#include "base/check.h"
#include "model/synth/bpe_trainer.h"
#include "model/synth/demo_text.h"
#include "model/tool_format/tool_tokens.h"

namespace infer {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr std::string_view kSpace = "\xE2\x96\x81";  // "▁"
constexpr int kNumSpecials = 6;

std::string normalize(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == ' ') {
      out += kSpace;
    } else {
      out += c;
    }
  }
  return out;
}

ordered_json added_token(int id, std::string_view content, bool special = true) {
  return ordered_json{{"id", id},        {"content", content}, {"single_word", false},
                      {"lstrip", false}, {"rstrip", false},    {"normalized", false},
                      {"special", special}};
}

// Gemma 4's chat and tool markers besides the turn ones (the tool markers, <|think|>,
// <|channel>, <channel|>): the vocabulary's last ids, added tokens that are not special, as in
// Gemma's tokenizer.json, so that --tools works on the demo model too.
std::vector<std::string_view> format_markers() {
  std::vector<std::string_view> out;
  for (std::string_view m : kFormatMarkers) {
    if (m != kTurnOpen && m != kTurnClose) out.push_back(m);
  }
  return out;
}

// The fixed parts of Gemma's tokenizer.json (normalizer, pre-tokenizer, template, decoder).
void add_pipeline(ordered_json* tok) {
  ordered_json& t = *tok;
  t["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}};
  t["pre_tokenizer"] = {{"type", "Split"},
                        {"pattern", {{"String", " "}}},
                        {"behavior", "MergedWithPrevious"},
                        {"invert", false}};
  const ordered_json bos = {{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}};
  const ordered_json bos1 = {{"SpecialToken", {{"id", "<bos>"}, {"type_id", 1}}}};
  const ordered_json a = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
  const ordered_json b = {{"Sequence", {{"id", "B"}, {"type_id", 1}}}};
  t["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", {bos, a}},
      {"pair", {bos, a, bos1, b}},
      {"special_tokens",
       {{"<bos>", {{"id", "<bos>"}, {"ids", {kDemoBosId}}, {"tokens", {"<bos>"}}}}}}};
  t["decoder"] = {{"type", "Sequence"},
                  {"decoders",
                   {{{"type", "Replace"}, {"pattern", {{"String", kSpace}}}, {"content", " "}},
                    {{"type", "ByteFallback"}},
                    {{"type", "Fuse"}}}}};
}

}  // namespace

DemoTokenizer build_demo_tokenizer(int vocab_size) {
  INFER_CHECK(vocab_size >= 512, "demo vocabulary of %d entries is too small", vocab_size);
  const char* specials[kNumSpecials] = {"<pad>", "<eos>", "<bos>", "<unk>", "<|turn>", "<turn|>"};
  const std::vector<std::string_view> markers = format_markers();
  const int merge_limit = vocab_size - int(markers.size());  // the markers take the last ids

  std::vector<std::string> pieces(specials, specials + kNumSpecials);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    pieces.emplace_back(name);
  }
  // Base characters: newline, tab, printable ASCII with "▁" for the space, then the text's own.
  const std::string text = normalize(demo_training_text());
  const size_t max_merges = static_cast<size_t>(vocab_size);  // an upper bound; trimmed below
  BpeTraining bpe = train_bpe(text, max_merges);
  std::set<std::string> base = {"\n", "\t", std::string(kSpace)};
  for (char c = '!'; c <= '~'; ++c) base.insert(std::string(1, c));
  base.insert(bpe.alphabet.begin(), bpe.alphabet.end());
  pieces.insert(pieces.end(), base.begin(), base.end());

  std::unordered_map<std::string, int> ids;
  for (size_t i = 0; i < pieces.size(); ++i) ids.emplace(pieces[i], static_cast<int>(i));
  ordered_json merges = ordered_json::array();
  for (const auto& [left, right] : bpe.merges) {
    const std::string joined = left + right;
    if (!ids.count(joined)) {
      if (static_cast<int>(pieces.size()) >= merge_limit) break;
      ids.emplace(joined, static_cast<int>(pieces.size()));
      pieces.push_back(joined);
    }
    merges.push_back({left, right});
  }
  const int first_unused_id = static_cast<int>(pieces.size());
  for (int unused = 0; static_cast<int>(pieces.size()) < merge_limit; ++unused) {
    pieces.push_back("<unused" + std::to_string(unused) + ">");
  }
  for (std::string_view m : markers) pieces.emplace_back(m);

  ordered_json tok;
  tok["version"] = "1.0";
  tok["truncation"] = nullptr;
  tok["padding"] = nullptr;
  ordered_json added = ordered_json::array();
  for (int i = 0; i < kNumSpecials; ++i) added.push_back(added_token(i, specials[i]));
  for (size_t i = 0; i < markers.size(); ++i) {
    added.push_back(added_token(merge_limit + int(i), markers[i], /*special=*/false));
  }
  tok["added_tokens"] = added;
  add_pipeline(&tok);
  ordered_json vocab = ordered_json::object();
  for (size_t i = 0; i < pieces.size(); ++i) vocab[pieces[i]] = static_cast<int>(i);
  tok["model"] = {{"type", "BPE"},
                  {"dropout", nullptr},
                  {"unk_token", "<unk>"},
                  {"continuing_subword_prefix", nullptr},
                  {"end_of_word_suffix", nullptr},
                  {"fuse_unk", true},
                  {"byte_fallback", true},
                  {"ignore_merges", false},
                  {"vocab", vocab},
                  {"merges", merges}};
  return DemoTokenizer{tok.dump(1) + "\n", first_unused_id};
}

std::string demo_tokenizer_json(int vocab_size) { return build_demo_tokenizer(vocab_size).json; }

}  // namespace infer
