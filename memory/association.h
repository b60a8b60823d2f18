// Association keys and the dual recall score (DESIGN.md §5, issue 29 item 4). An episode's key
// and a query are both built from a KvBlock (as read_kv and the eviction sink give it): the
// pre-RoPE K rows of the tiered layers and the token ids, so re-presenting an excerpt finds its
// episode whether or not the rows kept the token's identity across contexts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/result.h"
#include "model/kv_ring_api.h"
#include "model/thread_pool.h"

namespace infer::memory {

// A token's feature (features below):
//   1. each head of each used tiered layer's K row made unit (the gain carries little identity),
//      concatenated: x [in] with in = Σ row_floats;
//   2. centred: x - mean, the mean direction learned once by fit() (random weights give every
//      key a large common component that would make all cosines near 1), made unit;
//   3. reduced by a fixed seeded Gaussian projection P1 [reduce_dims, in], made unit;
//   4. lifted by a fixed Gaussian matrix L [lift_dims, reduce_dims] and cut to its lift_active
//      largest entries (winner-take-all, the "fly hash" of Dasgupta et al. 2017): distinct tokens
//      share few active units, the same token in another context keeps most of them.
// A span's rows key: the active-unit counts of its tokens minus their expected counts (the
// per-unit frequency fit() measured), projected by a fixed Gaussian P2 [dims, lift_dims], made unit.
// A span's ids key: its token ids and the bigrams of consecutive ids inside it, each hashed to
// one of `dims` units with a sign (a count sketch), made unit. K rows of the tiered layers carry
// the context as well as the token (on an E2B-shaped random checkpoint the same token's layer-4
// K row in an excerpt and in its episode are barely alike, docs/MEMORY.md), so the ids are what
// makes a re-presented excerpt find its episode whatever the weights; the rows add what the
// model makes of the text.
// A span's key: unit(sqrt(1 - id_weight) rows key + sqrt(id_weight) ids key), so a cosine between
// two keys is (1 - id_weight) cos(rows) + id_weight cos(ids) up to the small cross terms.
// An episode's key is `sub_spans` such keys of consecutive equal parts (key_floats() =
// sub_spans * dims). A query (a turn's input: a few tokens to hundreds) is cut the same way into
// at most query_parts parts of about query_part_tokens (longer when the input is longer), so a
// long input does not dilute the part that matches; association(query, key) is the largest
// cosine over every (query part, key part) pair, 0 at least.
struct AssociationConfig {
  int dims = 256;         // one sub-span key
  int sub_spans = 4;      // parts of an episode, each keyed
  int reduce_dims = 128;  // step 3
  int lift_dims = 2048;   // step 4
  int lift_active = 32;   // step 4 (0: no lift; P2 applies to the reduced vector)
  int max_layers = 0;     // the first max_layers tiered layers (0: all)
  float id_weight = 0.5f; // share of the ids key (0: rows only, 1: ids only)
  int query_parts = 4;        // the most parts a query is cut into
  int query_part_tokens = 16; // a query part's length while the query has room (a key part's)
  uint64_t seed = 0x5eedULL;
};

class Association {
 public:
  // row_floats[i], head_dim[i]: of the i-th tiered layer, ascending (n_kv * d and d).
  Association(const AssociationConfig& cfg, std::vector<int> row_floats,
              std::vector<int> head_dim);
  const AssociationConfig& config() const { return cfg_; }
  size_t key_floats() const { return size_t(cfg_.dims) * size_t(cfg_.sub_spans); }
  size_t query_floats() const { return size_t(cfg_.dims) * size_t(cfg_.query_parts); }

  // Learns the mean direction and the unit frequencies from b's rows (all of them; a few
  // hundred tokens are plenty). Must run before keys are made.
  void fit(const KvBlock& b);
  bool fitted() const { return !mean_.empty(); }
  // The learned state (mean and frequencies) as floats, and its inverse (checks the length).
  std::vector<float> state() const;
  // state()'s length once fitted.
  size_t state_floats() const;
  Result<void> set_state(std::span<const float> s);

  // Tokens [i0, i0 + n) of b. out: [key_floats()] (episode) or [query_floats()] (query).
  // pool: the projections' rows split between its threads (the same bits as without one).
  void episode_key(const KvBlock& b, size_t i0, size_t n, float* out,
                   ThreadPool* pool = nullptr) const;
  // query_key returns how many query parts it filled (the rest are zero).
  size_t query_key(const KvBlock& b, size_t i0, size_t n, float* out,
                   ThreadPool* pool = nullptr) const;

  // The largest cosine between the parts of query [query_floats()] and of key [key_floats()],
  // 0 at least (a query's unused parts are zero).
  // parts: the query's filled parts (query_key's answer); the rest are skipped.
  float association(const float* query, const float* key, size_t parts = SIZE_MAX) const;

 private:
  size_t in_floats() const;
  void features(const KvBlock& b, size_t t0, size_t n, float* reduced, std::vector<float>& x,
                ThreadPool* pool) const;
  // f(reduced [reduce_dims], active units) for each token of [t0, t0 + n), in order.
  template <class F>
  void for_each_token(const KvBlock& b, size_t t0, size_t n, ThreadPool* pool, F&& f) const;
  void span_key(const KvBlock& b, size_t i0, size_t n, float* out, ThreadPool* pool) const;
  void rows_key(const KvBlock& b, size_t i0, size_t n, float* out, ThreadPool* pool) const;
  void ids_key(const KvBlock& b, size_t i0, size_t n, float* out) const;

  AssociationConfig cfg_;
  std::vector<int> row_floats_, head_dim_;
  int n_layers_ = 0;
  // Stored transposed: [in, reduce], [reduce, lift], [lift or reduce, dims].
  std::vector<float> p1_, lift_, p2_;
  std::vector<float> mean_;            // [in] (empty until fit)
  std::vector<float> freq_;            // [lift_dims] or [reduce_dims]: expected per token
};

// The dual score (issue 29 item 4): association first, strength and recency as tie-breakers.
//   strength_now = strength * 2^(-(now - last_use) / half_life)   (last_use: written or recalled)
//   score        = cos + strength_weight * ln(max(strength_now, kMinStrength))
// A recalled episode's strength becomes strength_now + recall_boost. With the defaults a fresh
// episode (strength 1) adds 0, one recalled 3 times adds ~0.07, and a day untouched takes
// ~0.035 off: enough to order ties and near-ties, never to beat a clear association (an excerpt
// of an episode scores ~0.5 above unrelated text on the fixtures).
struct ScoreRule {
  double half_life_ms = 24.0 * 3600 * 1000;
  double strength_weight = 0.05;
  double recall_boost = 1.0;
  static constexpr double kMinStrength = 1e-3;

  double strength_now(float strength, int64_t last_use_ms, int64_t now_ms) const;
  // strength_weight * ln(max(strength_now, kMinStrength)): score = association + this.
  double strength_term(float strength, int64_t last_use_ms, int64_t now_ms) const;
  double score(float association, float strength, int64_t last_use_ms, int64_t now_ms) const;
  float after_recall(float strength, int64_t last_use_ms, int64_t now_ms) const;
};

}  // namespace infer::memory
