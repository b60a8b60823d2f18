// Pre-tokenizers of tokenizer.json: Split on a string pattern with HF's five delimiter
// behaviours (Gemma: " ", MergedWithPrevious), and Sequence of them. Output: byte ranges.
#pragma once

#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace infer::tok {

struct ByteRange {
  size_t begin;
  size_t end;
};

class PreTokenizer {
 public:
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

  // `j` is tokenizer.json's "pre_tokenizer" (null means none).
  static Result<PreTokenizer> from_json(const nlohmann::json& j, std::string_view where);

  // Splits `text` (already normalized) into the non-empty pieces the model tokenizes.
  void split(std::string_view text, std::vector<ByteRange>& pieces) const;

 private:
  struct Step {
    std::string pattern;
    Behavior behavior;
    bool invert;
  };
  static Result<void> add_steps(const nlohmann::json& j, std::string_view where,
                                std::vector<Step>& steps);
  static void split_one(std::string_view text, ByteRange piece, const Step& step,
                        std::vector<ByteRange>& out);

  std::vector<Step> steps_;
};

}  // namespace infer::tok
