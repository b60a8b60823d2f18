// Split pre-tokenizer: HF tokenizers pre_tokenizers/split.rs over normalizer.rs
// NormalizedString::split (matches found left to right, then merged per the behaviour).
#include "model/tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "model/tokenizer/json_fields.h"

namespace infer::tok {
namespace {

struct Segment {
  ByteRange range;
  bool is_match;
};

Result<PreTokenizer::Behavior> parse_behavior(const std::string& s, std::string_view where) {
  using B = PreTokenizer::Behavior;
  if (s == "Removed") return B::kRemoved;
  if (s == "Isolated") return B::kIsolated;
  if (s == "MergedWithPrevious") return B::kMergedWithPrevious;
  if (s == "MergedWithNext") return B::kMergedWithNext;
  if (s == "Contiguous") return B::kContiguous;
  return make_error(ErrorCode::kParse,
                    std::string(where) + ": unknown split behavior \"" + s + "\"");
}

}  // namespace

Result<void> PreTokenizer::add_steps(const nlohmann::json& j, std::string_view where,
                                     std::vector<Step>& steps) {
  if (j.is_null()) return Ok{};
  INFER_TRY(const std::string type, json_string(j, "type", where));
  const std::string at = std::string(where) + " (" + type + ")";
  if (type == "Sequence") {
    INFER_TRY(const nlohmann::json* list, json_array(j, "pretokenizers", at));
    for (size_t i = 0; i < list->size(); ++i) {
      INFER_TRY_VOID(
          add_steps((*list)[i], at + ".pretokenizers[" + std::to_string(i) + "]", steps));
    }
    return Ok{};
  }
  if (type != "Split") {
    return make_error(ErrorCode::kUnsupported, std::string(where) + ": pre_tokenizer type \"" +
                                                   type + "\" is not supported");
  }
  Step step{};
  INFER_TRY(step.pattern, json_string_pattern(j, at));
  INFER_TRY(const std::string behavior, json_string(j, "behavior", at));
  INFER_TRY(step.behavior, parse_behavior(behavior, at));
  INFER_TRY(step.invert, json_bool_or(j, "invert", false, at));
  steps.push_back(std::move(step));
  return Ok{};
}

Result<PreTokenizer> PreTokenizer::from_json(const nlohmann::json& j, std::string_view where) {
  PreTokenizer p;
  INFER_TRY_VOID(add_steps(j, where, p.steps_));
  return p;
}

void PreTokenizer::split_one(std::string_view text, ByteRange piece, const Step& step,
                             std::vector<ByteRange>& out) {
  const std::string_view s = text.substr(0, piece.end);
  if (step.pattern.empty() || s.find(step.pattern, piece.begin) == std::string_view::npos) {
    // No match: the piece is one non-match segment, which every behaviour keeps unless inverted
    // and removed.
    if (!(step.invert && step.behavior == Behavior::kRemoved)) out.push_back(piece);
    return;
  }
  std::vector<Segment> segs;  // alternating non-matches and matches, as find_matches yields
  size_t prev = piece.begin;
  for (size_t hit; (hit = s.find(step.pattern, prev)) != std::string_view::npos;) {
    if (prev != hit) segs.push_back({{prev, hit}, false});
    segs.push_back({{hit, hit + step.pattern.size()}, true});
    prev = hit + step.pattern.size();
  }
  if (prev != piece.end) segs.push_back({{prev, piece.end}, false});
  if (step.invert) {
    for (Segment& g : segs) g.is_match = !g.is_match;
  }
  std::vector<ByteRange> merged;
  bool previous_match = false;
  switch (step.behavior) {
    case Behavior::kRemoved:
      for (const Segment& g : segs) {
        if (!g.is_match) merged.push_back(g.range);
      }
      break;
    case Behavior::kIsolated:
      for (const Segment& g : segs) merged.push_back(g.range);
      break;
    case Behavior::kMergedWithPrevious:
      for (const Segment& g : segs) {
        if (g.is_match && !previous_match && !merged.empty()) {
          merged.back().end = g.range.end;
        } else {
          merged.push_back(g.range);
        }
        previous_match = g.is_match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (size_t i = segs.size(); i-- > 0;) {
        if (segs[i].is_match && !previous_match && !merged.empty()) {
          merged.back().begin = segs[i].range.begin;
        } else {
          merged.push_back(segs[i].range);
        }
        previous_match = segs[i].is_match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    case Behavior::kContiguous:
      for (const Segment& g : segs) {
        if (g.is_match == previous_match && !merged.empty()) {
          merged.back().end = g.range.end;
        } else {
          merged.push_back(g.range);
        }
        previous_match = g.is_match;
      }
      break;
  }
  for (const ByteRange& r : merged) {
    if (r.begin != r.end) out.push_back(r);
  }
}

void PreTokenizer::split(std::string_view text, std::vector<ByteRange>& pieces) const {
  pieces.clear();
  if (text.empty()) return;
  pieces.push_back({0, text.size()});
  std::vector<ByteRange> next;
  for (const Step& step : steps_) {
    next.clear();
    for (const ByteRange& p : pieces) split_one(text, p, step, next);
    pieces.swap(next);
  }
}

}  // namespace infer::tok
