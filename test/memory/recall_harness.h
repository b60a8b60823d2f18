// The retrieval-accuracy measurement (issue 29, "what must be shown"): episodes of distinct
// random token text streamed through a ring forward pass (CPU or GPU), each in a fresh context,
// their keys stored; then a 16-token excerpt of episode k, at a random offset, re-presented in a
// fresh context (optionally after other random text) and ranked against every stored key.
#pragma once

#include <cstdint>
#include <vector>

#include "memory/association.h"
#include "model/forward.h"
#include "model/kv_ring.h"
#include "model/model.h"
#include "model/thread_pool.h"

namespace infer::test {

struct RecallSetup {
  int episodes = 64;
  int episode_tokens = 64;
  int excerpt_tokens = 16;
  int queries = 64;           // excerpts of episodes 0, e/q, 2e/q, ...
  int prefix_tokens = 0;      // random text before the excerpt (0: the excerpt opens a context)
  bool query_prefix = false;  // the query is the prefix and the excerpt (a turn's whole input)
  int fit_episodes = 4;       // episodes whose rows fit the association (4 x 64 = 256 tokens)
  bool diagnose = false;      // fill RecallResult's per-layer cosines (keeps every episode's K)
  uint32_t seed = 1;
  memory::AssociationConfig assoc;
};

struct RecallResult {
  double recall_at1 = 0, recall_at3 = 0;
  double mean_true_cos = 0, mean_best_other_cos = 0;
  double forward_ms = 0;  // all forward passes (episodes and queries)
  double key_ms = 0;      // making keys and queries
  // With diagnose, per tiered layer: the mean cosine of one head's K row for the same token in
  // the excerpt's context and in its episode's (same), and for the excerpt's token against the
  // episode's next token (other: what unrelated tokens share). Raw rows, no centring.
  std::vector<int> layers;
  std::vector<double> layer_cos_same, layer_cos_other;
};

// The rows the measurement makes keys from (K only): collected once, scored under any number
// of association configurations.
struct RecallRows {
  KvBlock fit;                       // the first fit_episodes episodes' rows
  std::vector<KvBlock> episodes;     // [episodes]
  std::vector<KvBlock> queries;      // [queries]: the excerpts' rows (with the prefix's, if asked)
  size_t excerpt_at = 0;             // where the excerpt starts in a query's rows
  std::vector<int> query_episode;    // [queries]: the episode each excerpt was cut from
  std::vector<int> query_offset;     // [queries]: its first token's index in that episode
  double forward_ms = 0;
};

// The ring a forward pass given to collect_recall_rows must run (fits an episode and a query).
RingConfig recall_ring(const RecallSetup& setup);
// fwd: a ring forward pass of model made with recall_ring(setup) (kv_ring() non-null).
RecallRows collect_recall_rows(Forward& fwd, const RecallSetup& setup);
// Keys and rankings of rows under setup.assoc (setup's counts must be the ones rows came from).
RecallResult score_recall(const ModelConfig& cfg, const RecallRows& rows, const RecallSetup& setup);

// collect_recall_rows then score_recall, on a CpuForward of pool.
RecallResult measure_recall(const Model& model, ThreadPool& pool, const RecallSetup& setup);

}  // namespace infer::test
