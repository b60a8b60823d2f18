// Normalizers of tokenizer.json that Gemma-style BPE tokenizers use: Replace (string pattern),
// Prepend, Strip and Sequence of them. Applied to the text between added tokens.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace infer::tok {

class Normalizer {
 public:
  // `j` is tokenizer.json's "normalizer" (null means none); `where` prefixes error messages.
  static Result<Normalizer> from_json(const nlohmann::json& j, std::string_view where);

  bool is_identity() const { return steps_.empty(); }
  // Writes the normalized `text` to `out` (replacing its contents).
  void apply(std::string_view text, std::string& out) const;

 private:
  struct Step {
    enum class Kind { kReplace, kPrepend, kStrip } kind;
    std::string pattern;  // kReplace: the string replaced
    std::string content;  // kReplace: its replacement; kPrepend: the prefix
    bool strip_left = false;
    bool strip_right = false;
  };
  static Result<void> add_steps(const nlohmann::json& j, std::string_view where,
                                std::vector<Step>& steps);

  std::vector<Step> steps_;
};

}  // namespace infer::tok
