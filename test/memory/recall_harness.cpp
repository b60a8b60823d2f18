// The retrieval-accuracy measurement (recall_harness.h).
#include "test/memory/recall_harness.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "base/check.h"
#include "model/cpu_forward.h"

namespace infer::test {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<int32_t> random_ids(int64_t n, int64_t V, uint32_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint64_t s = 0x9e3779b97f4a7c15ULL * (seed + 1);
  for (auto& id : ids) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    id = int32_t(1 + (s >> 33) % uint64_t(V - 1));
  }
  return ids;
}

double cosine(const float* a, const float* b, size_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < n; ++i) ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}

// Per tiered layer, the mean over heads and tokens of cos(q row q0 + t, e row e0 + t + shift),
// t + shift < n.
void add_layer_cosines(const ModelConfig& cfg, const KvBlock& q, size_t q0, const KvBlock& e,
                       size_t e0, size_t n, size_t shift, std::vector<double>& sum) {
  for (size_t l = 0; l < q.layers.size(); ++l) {
    const LayerPlan& lp = cfg.layers[size_t(q.layers[l])];
    const size_t d = size_t(lp.head_dim), rf = size_t(lp.num_key_value_heads) * d;
    double s = 0;
    int count = 0;
    for (size_t t = 0; t + shift < n; ++t)
      for (size_t h = 0; h < rf; h += d, ++count)
        s += cosine(q.k[l].data() + (q0 + t) * rf + h, e.k[l].data() + (e0 + t + shift) * rf + h,
                    d);
    sum[l] += count > 0 ? s / count : 0.0;
  }
}

}  // namespace

RingConfig recall_ring(const RecallSetup& su) {
  RingConfig rc;
  rc.anchors = 4;
  rc.window = std::max(su.episode_tokens, su.prefix_tokens + su.excerpt_tokens) + 16;
  rc.recall = 16;
  rc.evict = EvictPolicy::kFifo;
  return rc;
}

RecallResult measure_recall(const Model& model, ThreadPool& pool, const RecallSetup& su) {
  CpuForward fwd(model, pool, recall_ring(su), 64);
  return score_recall(model.config(), collect_recall_rows(fwd, su), su);
}

RecallRows collect_recall_rows(Forward& fwd, const RecallSetup& su) {
  KvRingAccess* ring = fwd.kv_ring();
  INFER_CHECK(ring != nullptr, "recall harness: the forward pass runs no KV ring");
  const int64_t V = fwd.vocab_size();
  std::vector<float> logits(static_cast<size_t>(V));
  RecallRows rows;
  auto episode_ids = [&](int e) { return random_ids(su.episode_tokens, V, su.seed * 1000003u + uint32_t(e)); };
  auto run = [&](const std::vector<int32_t>& ids, int64_t from, int64_t n, KvBlock* out) {
    const auto t0 = std::chrono::steady_clock::now();
    fwd.reset();
    INFER_CHECK(fwd.prefill(ids, logits.data()).ok(), "prefill");
    INFER_CHECK(ring->read_kv(from, n, out).ok(), "read_kv");
    out->v.clear();  // keys come from K rows only
    rows.forward_ms += ms_since(t0);
  };
  rows.episodes.resize(size_t(su.episodes));
  for (int e = 0; e < su.episodes; ++e) {
    KvBlock& b = rows.episodes[size_t(e)];
    run(episode_ids(e), 0, su.episode_tokens, &b);
    if (e >= su.fit_episodes) continue;
    if (rows.fit.layers.empty()) {
      rows.fit = b;
      continue;
    }
    rows.fit.pos.insert(rows.fit.pos.end(), b.pos.begin(), b.pos.end());
    rows.fit.ids.insert(rows.fit.ids.end(), b.ids.begin(), b.ids.end());
    for (size_t l = 0; l < b.layers.size(); ++l)
      rows.fit.k[l].insert(rows.fit.k[l].end(), b.k[l].begin(), b.k[l].end());
  }
  uint64_t s = su.seed * 7919u + 17u;
  rows.queries.resize(size_t(su.queries));
  for (int i = 0; i < su.queries; ++i) {
    const int k = int(int64_t(i) * su.episodes / su.queries);
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    const int off = int((s >> 33) % uint64_t(su.episode_tokens - su.excerpt_tokens + 1));
    std::vector<int32_t> ids = random_ids(su.prefix_tokens, V, 0xabcdu + uint32_t(i));
    const std::vector<int32_t> ep = episode_ids(k);
    ids.insert(ids.end(), ep.begin() + off, ep.begin() + off + su.excerpt_tokens);
    rows.excerpt_at = su.query_prefix ? size_t(su.prefix_tokens) : 0;
    run(ids, su.prefix_tokens - int64_t(rows.excerpt_at), int64_t(rows.excerpt_at) + su.excerpt_tokens,
        &rows.queries[size_t(i)]);
    rows.query_episode.push_back(k);
    rows.query_offset.push_back(off);
  }
  return rows;
}

RecallResult score_recall(const ModelConfig& cfg, const RecallRows& rows,
                          const RecallSetup& su) {
  RecallResult r;
  r.forward_ms = rows.forward_ms;
  std::vector<int> row_floats, head_dim;
  for (int layer : rows.fit.layers) {
    const LayerPlan& lp = cfg.layers[size_t(layer)];
    row_floats.push_back(lp.num_key_value_heads * lp.head_dim);
    head_dim.push_back(lp.head_dim);
  }
  memory::Association assoc(su.assoc, row_floats, head_dim);
  assoc.fit(rows.fit);

  const size_t E = rows.episodes.size(), Q = rows.queries.size();
  const size_t KF = assoc.key_floats(), QF = assoc.query_floats();
  std::vector<float> keys(E * KF);
  auto t0 = std::chrono::steady_clock::now();
  for (size_t e = 0; e < E; ++e) {
    const KvBlock& b = rows.episodes[e];
    assoc.episode_key(b, 0, b.size(), keys.data() + e * KF);
  }
  r.key_ms += ms_since(t0);
  if (su.diagnose) {
    r.layers = rows.fit.layers;
    r.layer_cos_same.assign(r.layers.size(), 0.0);
    r.layer_cos_other.assign(r.layers.size(), 0.0);
  }
  int hit1 = 0, hit3 = 0;
  std::vector<float> q(QF);
  for (size_t i = 0; i < Q; ++i) {
    const KvBlock& b = rows.queries[i];
    const size_t k = size_t(rows.query_episode[i]), off = size_t(rows.query_offset[i]);
    if (su.diagnose) {
      const size_t q0 = rows.excerpt_at, n = b.size() - q0;
      add_layer_cosines(cfg, b, q0, rows.episodes[k], off, n, 0, r.layer_cos_same);
      add_layer_cosines(cfg, b, q0, rows.episodes[k], off, n, 1, r.layer_cos_other);
    }
    t0 = std::chrono::steady_clock::now();
    assoc.query_key(b, 0, b.size(), q.data());
    r.key_ms += ms_since(t0);
    const float own = assoc.association(q.data(), keys.data() + k * KF);
    int better = 0;
    float best_other = -2;
    for (size_t e = 0; e < E; ++e) {
      if (e == k) continue;
      const float c = assoc.association(q.data(), keys.data() + e * KF);
      best_other = std::max(best_other, c);
      if (c >= own) ++better;
    }
    hit1 += better == 0;
    hit3 += better < 3;
    r.mean_true_cos += own;
    r.mean_best_other_cos += best_other;
  }
  const double nq = double(std::max<size_t>(Q, 1));
  r.recall_at1 = hit1 / nq;
  r.recall_at3 = hit3 / nq;
  r.mean_true_cos /= nq;
  r.mean_best_other_cos /= nq;
  for (double& c : r.layer_cos_same) c /= nq;
  for (double& c : r.layer_cos_other) c /= nq;
  return r;
}

}  // namespace infer::test
