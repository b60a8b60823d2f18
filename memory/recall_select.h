// Which stored episodes a turn's recall decodes (episodic_recall.cpp): every key scored against
// the query's parts with the dual score (association.h), then walked best first, whole episodes
// only, until no episode left fits the token budget.
//
// Two ways to the same answer. The exact path computes every key's association in fp32. The
// fast path first scores the keys' 16-bit codes (key_codes.h, half the bytes, integer
// dots) with a proven bound on how far the fp32 association can be from the coded one, then
// rescores in fp32 only the keys whose bound reaches the kCandidates-th best lower bound: every
// key it leaves out scores below every key it keeps, so the walk sees the same keys in the
// same order, with the same association and score, bit for bit. Should the walk go further than
// that guarantee reaches, the fast path starts over on the exact one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "memory/association.h"
#include "memory/key_index.h"

namespace infer::memory {

// One episode to decode: its index in the KeyIndex and what it scored.
struct RecallPick {
  size_t index = 0;
  float association = 0;
  double score = 0;
};

struct SelectOptions {
  float min_association = 0.2f;  // below this an episode is never recalled
  size_t budget_tokens = 64;     // the most tokens the picks hold
  ScoreRule rule;
  int64_t now_ms = 0;
  bool exact = false;  // every key in fp32 (the reference the fast path equals)
};

// Holds the buffers a selection works in, so that a recall allocates nothing once they have
// grown to the store's size. One caller at a time.
class RecallSelector {
 public:
  // Keys the fast path rescores at least (more when bounds overlap at the threshold).
  static constexpr size_t kCandidates = 16;

  // query: [assoc.query_floats()], its first `parts` parts filled (Association::query_key).
  // picks: best first (score descending, then the smaller episode id).
  void select(const Association& assoc, const KeyIndex& index, const float* query, size_t parts,
              const SelectOptions& o, std::vector<RecallPick>* picks);
  // Keys the last select scored in fp32 (all of them on the exact path).
  size_t rescored() const { return rescored_; }
  // Whether the last fast select had to start over on the exact path.
  bool fell_back() const { return fell_back_; }

 private:
  struct Scored {
    size_t k;
    float association;
    double score;
  };
  // A key the coded pass could not rule out: its score lies in [lo, hi].
  struct Bounded {
    uint32_t k;
    bool sure;  // its association is at least min_association for certain
    double lo, hi;
  };
  void select_exact(const Association& assoc, const KeyIndex& index, const float* query,
                    size_t parts, const SelectOptions& o, std::vector<RecallPick>* picks);
  // Walks scored_ best first. false: the walk needed more than its first `guaranteed`, which
  // are known to be the best of all keys (all: scored_ holds every key that passes; picks are
  // then partial).
  bool walk(const KeyIndex& index, size_t guaranteed, bool all, size_t shortest,
            const SelectOptions& o, std::vector<RecallPick>* picks);
  // Fills bounded_ from the codes; returns false where the codes cannot be used.
  bool bound_all(const KeyIndex& index, const float* query, size_t parts,
                 const SelectOptions& o);

  std::vector<Scored> scored_;
  std::vector<Bounded> bounded_;
  std::vector<double> lows_;
  std::vector<int16_t> query_codes_;
  std::vector<int32_t> raw_;
  size_t rescored_ = 0;
  bool fell_back_ = false;
};

}  // namespace infer::memory
