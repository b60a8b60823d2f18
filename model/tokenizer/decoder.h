// The decoder of tokenizer.json: Sequence of Replace (string pattern), ByteFallback, Fuse and
// Strip, as HF's decode_chain; Gemma's is Replace "▁"->" ", ByteFallback, Fuse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace infer::tok {

struct DecoderStep {
  enum class Kind { kReplace, kByteFallback, kFuse, kStrip } kind;
  std::string pattern;  // kReplace
  std::string content;  // kReplace: replacement; kStrip: the character stripped
  size_t start = 0;     // kStrip: at most this many leading `content` characters
  size_t stop = 0;      // kStrip: at most this many trailing ones
};

// "<0xNN>" -> NN, or -1 for any other token (HF ByteFallback's test).
int byte_token_value(std::string_view token);

class Decoder {
 public:
  // `j` is tokenizer.json's "decoder"; null means none, and decode() then joins with " " as
  // HF's Tokenizer::decode does.
  static Result<Decoder> from_json(const nlohmann::json& j, std::string_view where);

  std::string decode(std::vector<std::string> tokens) const;
  bool present() const { return present_; }
  const std::vector<DecoderStep>& steps() const { return steps_; }

  // Per-token steps, shared with the streaming decoder.
  static void replace_in(std::string& s, const DecoderStep& step);
  static void strip_in(std::string& s, const DecoderStep& step);

 private:
  static Result<void> add_steps(const nlohmann::json& j, std::string_view where,
                                std::vector<DecoderStep>& steps);
  static void byte_fallback(std::vector<std::string>& tokens);

  std::vector<DecoderStep> steps_;
  bool present_ = false;
};

}  // namespace infer::tok
