// Choosing a recall's episodes (recall_select.h).
//
// The bound. A query part q and a key part k, each coded as x = s c + r (key_codes.h), write
// q^ = s_q c_q, k^ = s_k c_k. Then q.k - q^.k^ = q^.r_k + r_q.k^ + r_q.r_k, so by Cauchy-Schwarz
//   |q.k - s_q s_k (c_q . c_k)| <= |q^| |r_k| + |r_q| (|k^| + |r_k|),
// and the fp32 dot the exact path computes (any order of D products and sums) is within
// gamma |q| |k| of q.k, gamma = D 2^-24 / (1 - D 2^-24) <= (D + 4) 2^-24, |q| <= |q^| + |r_q|,
// |k| <= |k^| + |r_k|. Taking the largest |q^|, |r_q| over the query's parts and |r_k|,
// |k^| + |r_k| over the key's (KeyBound), one eps per key bounds every pair, so the fp32
// association max(0, max over pairs) lies in [max(0, m - eps), max(0, m + eps)] with m the
// largest coded dot. eps is widened by 0.1% and 1e-6 for the double arithmetic that computes
// it, and a score's bounds by 1e-9 for its own rounding.
#include "memory/recall_select.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace infer::memory {
namespace {

constexpr size_t kChunk = 256;  // keys a coded_dots call scores: its output stays in cache

int64_t last_use(const EpisodeInfo& i) { return std::max(i.written_ms, i.recalled_ms); }

}  // namespace

void RecallSelector::select(const Association& assoc, const KeyIndex& index, const float* query,
                            size_t parts, const SelectOptions& o,
                            std::vector<RecallPick>* picks) {
  picks->clear();
  rescored_ = 0;
  fell_back_ = false;
  if (index.size() == 0) return;
  const bool same_shape = index.part_floats() == size_t(assoc.config().dims) &&
                          index.parts() == size_t(assoc.config().sub_spans);
  if (o.exact || !same_shape ||
      !bound_all(index, query, std::min(parts, size_t(assoc.config().query_parts)), o)) {
    select_exact(assoc, index, query, parts, o, picks);
    return;
  }
  // T: the kCandidates-th best lower bound among keys that certainly pass min_association.
  lows_.clear();
  for (const Bounded& b : bounded_)
    if (b.sure) lows_.push_back(b.lo);
  double threshold = -std::numeric_limits<double>::infinity();
  if (lows_.size() >= kCandidates) {
    std::nth_element(lows_.begin(), lows_.begin() + std::ptrdiff_t(kCandidates - 1), lows_.end(),
                     std::greater<double>());
    threshold = lows_[kCandidates - 1];
  }
  // Every key that can score T or more, in fp32; the walk stops at the shortest passing episode,
  // so that is taken over every key (a sure key passes; an unsure one left out is checked only
  // where it would be the shortest).
  scored_.clear();
  size_t shortest = SIZE_MAX;
  for (const Bounded& b : bounded_) {
    const EpisodeInfo& info = index.info(b.k);
    if (b.sure) shortest = std::min<size_t>(shortest, info.n_tokens);
    if (b.hi < threshold) continue;
    const float a = assoc.association(query, index.key(b.k), parts);
    ++rescored_;
    if (a < o.min_association) continue;
    shortest = std::min<size_t>(shortest, info.n_tokens);
    scored_.push_back({b.k, a, o.rule.score(a, info.strength, last_use(info), o.now_ms)});
  }
  for (const Bounded& b : bounded_) {
    const EpisodeInfo& info = index.info(b.k);
    if (b.sure || b.hi >= threshold || info.n_tokens >= shortest) continue;
    ++rescored_;
    if (assoc.association(query, index.key(b.k), parts) >= o.min_association)
      shortest = info.n_tokens;
  }
  // Keys left out score below T, so those scoring T or more come first in any order of all.
  const size_t guaranteed = size_t(std::count_if(
      scored_.begin(), scored_.end(), [&](const Scored& s) { return s.score >= threshold; }));
  const bool all = threshold == -std::numeric_limits<double>::infinity();  // nothing left out
  if (!walk(index, guaranteed, all, shortest, o, picks)) {
    fell_back_ = true;
    select_exact(assoc, index, query, parts, o, picks);
  }
}

void RecallSelector::select_exact(const Association& assoc, const KeyIndex& index,
                                  const float* query, size_t parts, const SelectOptions& o,
                                  std::vector<RecallPick>* picks) {
  picks->clear();
  scored_.clear();
  size_t shortest = SIZE_MAX;  // of the candidates: once less room is left, the walk is over
  for (size_t k = 0; k < index.size(); ++k) {
    const float a = assoc.association(query, index.key(k), parts);
    if (a < o.min_association) continue;
    const EpisodeInfo& info = index.info(k);
    shortest = std::min<size_t>(shortest, info.n_tokens);
    scored_.push_back({k, a, o.rule.score(a, info.strength, last_use(info), o.now_ms)});
  }
  rescored_ = index.size();
  walk(index, scored_.size(), true, shortest, o, picks);
}

bool RecallSelector::walk(const KeyIndex& index, size_t guaranteed, bool all, size_t shortest,
                          const SelectOptions& o, std::vector<RecallPick>* picks) {
  // Best first; equal scores: the older episode (smaller id) first.
  const auto better = [&](const Scored& a, const Scored& b) {
    if (a.score != b.score) return a.score > b.score;
    return index.info(a.k).id < index.info(b.k).id;
  };
  // Sorted only as far as the walk goes (a few of thousands, usually).
  size_t sorted = 0, used = 0;
  for (size_t j = 0; used + shortest <= o.budget_tokens; ++j) {
    // Past what is known to come first (or past every candidate, with keys left out).
    if (j == guaranteed) return all && j == scored_.size();
    if (j == sorted) {
      sorted = std::min(scored_.size(), std::max<size_t>(16, 2 * sorted));
      std::partial_sort(scored_.begin() + std::ptrdiff_t(j),
                        scored_.begin() + std::ptrdiff_t(sorted), scored_.end(), better);
    }
    const Scored& s = scored_[j];
    const size_t n = index.info(s.k).n_tokens;
    if (used + n > o.budget_tokens) continue;  // whole episodes only
    picks->push_back({s.k, s.association, s.score});
    used += n;
  }
  return true;
}

bool RecallSelector::bound_all(const KeyIndex& index, const float* query, size_t parts,
                               const SelectOptions& o) {
  const size_t D = index.part_floats(), subs = index.parts();
  if (!index.coded() || parts == 0 || parts > 8) return false;
  query_codes_.resize(parts * D);
  double q_scale[8];
  double q_coded = 0, q_err = 0;
  for (size_t p = 0; p < parts; ++p) {
    const PartCode pc = code_part(query + p * D, D, query_codes_.data() + p * D);
    q_scale[p] = pc.scale;
    q_coded = std::max(q_coded, double(pc.coded_norm));
    q_err = std::max(q_err, double(pc.err_norm));
  }
  const double gamma = double(D + 4) * 0x1p-24;
  raw_.resize(kChunk * parts * subs);
  bounded_.clear();
  for (size_t k0 = 0; k0 < index.size(); k0 += kChunk) {
    const size_t n = std::min(kChunk, index.size() - k0);
    coded_dots(index.codes(k0), n, subs, query_codes_.data(), parts, D, raw_.data());
    for (size_t j = 0; j < n; ++j) {
      const size_t k = k0 + j;
      const float* k_scale = index.scales(k);
      const int32_t* r = raw_.data() + j * parts * subs;
      double m = -std::numeric_limits<double>::infinity();
      for (size_t p = 0; p < parts; ++p)
        for (size_t s = 0; s < subs; ++s)
          m = std::max(m, q_scale[p] * double(k_scale[s]) * double(r[p * subs + s]));
      const KeyBound& kb = index.bound(k);
      const double eps = (q_coded * kb.err_norm + q_err * kb.norm +
                          gamma * (q_coded + q_err) * kb.norm) * 1.001 + 1e-6;
      const double hi = std::max(0.0, m + eps);
      if (hi < double(o.min_association)) continue;  // never passes
      const double lo = std::max(0.0, m - eps);
      const EpisodeInfo& info = index.info(k);
      const double t = o.rule.strength_term(info.strength, last_use(info), o.now_ms);
      bounded_.push_back({uint32_t(k), lo >= double(o.min_association), lo + t - 1e-9,
                          hi + t + 1e-9});
    }
  }
  return true;
}

}  // namespace infer::memory
