// The logit fidelity of recalled rows (recall_fidelity.h).
#include "bench/recall_fidelity.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>

#include "memory/episodic_memory.h"
#include "model/cpu_forward.h"

namespace infer::bench {
namespace {

Error bad(const std::string& what) { return Error{ErrorCode::kInvalidArgument, what}; }

// log-softmax of x [n] in double.
void log_softmax(const float* x, int64_t n, std::vector<double>* out) {
  out->resize(size_t(n));
  const double m = *std::max_element(x, x + n);
  double z = 0;
  for (int64_t i = 0; i < n; ++i) z += std::exp(double(x[i]) - m);
  const double lse = m + std::log(z);
  for (int64_t i = 0; i < n; ++i) (*out)[size_t(i)] = double(x[i]) - lse;
}

// Sums one variant's agreement with the raw rows' logits, row by row.
struct Agreement {
  double kl_sum = 0, kl_max = 0;
  int64_t agree = 0, n = 0;
  void add(const float* ref, const float* other, int64_t rows, int64_t V) {
    for (int64_t r = 0; r < rows; ++r) {
      const float* a = ref + r * V;
      const float* b = other + r * V;
      const double kl = kl_divergence(a, b, V);
      kl_sum += kl;
      kl_max = std::max(kl_max, kl);
      agree += std::max_element(a, a + V) - a == std::max_element(b, b + V) - b;
      ++n;
    }
  }
  LogitAgreement result() const {
    LogitAgreement r;
    r.kl_mean = n > 0 ? kl_sum / double(n) : 0;
    r.kl_max = kl_max;
    r.greedy = n > 0 ? double(agree) / double(n) : 0;
    return r;
  }
};

// Squared error and squared norm of coded rows against raw rows (K or V of every layer).
struct RowError {
  double err = 0, norm = 0;
  void add(const std::vector<float>& raw, const std::vector<float>& coded) {
    for (size_t i = 0; i < raw.size() && i < coded.size(); ++i) {
      err += (double(coded[i]) - raw[i]) * (double(coded[i]) - raw[i]);
      norm += double(raw[i]) * raw[i];
    }
  }
  double rel() const { return norm > 0 ? std::sqrt(err / norm) : 0; }
};

}  // namespace

std::vector<int32_t> random_ids(int64_t n, int64_t V, uint64_t seed) {
  std::vector<int32_t> ids(size_t(std::max<int64_t>(n, 0)));
  uint64_t s = 0x9e3779b97f4a7c15ULL * (seed + 1);
  for (auto& id : ids) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    id = int32_t(4 + (s >> 33) % uint64_t(V - 4));
  }
  return ids;
}

Result<KvBlock> rows_at(const KvBlock& all, std::span<const int64_t> pos) {
  KvBlock out;
  out.layers = all.layers;
  out.k.resize(all.layers.size());
  out.v.resize(all.layers.size());
  for (const int64_t p : pos) {
    const auto it = std::find(all.pos.begin(), all.pos.end(), p);
    if (it == all.pos.end()) return bad("rows_at: position " + std::to_string(p) + " not held");
    const size_t i = size_t(it - all.pos.begin());
    out.pos.push_back(p);
    out.ids.push_back(all.ids[i]);
    for (size_t l = 0; l < all.layers.size(); ++l) {
      const size_t rf = all.k[l].size() / all.size();
      out.k[l].insert(out.k[l].end(), all.k[l].begin() + i * rf, all.k[l].begin() + (i + 1) * rf);
      out.v[l].insert(out.v[l].end(), all.v[l].begin() + i * rf, all.v[l].begin() + (i + 1) * rf);
    }
  }
  return out;
}

double kl_divergence(const float* p_logits, const float* q_logits, int64_t n) {
  std::vector<double> lp, lq;
  log_softmax(p_logits, n, &lp);
  log_softmax(q_logits, n, &lq);
  double kl = 0;
  for (size_t i = 0; i < size_t(n); ++i) kl += std::exp(lp[i]) * (lp[i] - lq[i]);
  return std::max(kl, 0.0);
}

Result<FidelityReport> measure_fidelity(const Model& model, ThreadPool& pool,
                                        const FidelitySetup& su,
                                        std::span<const memory::SrvqConfig> codecs) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t A = 4, E = su.episode_tokens, X = su.excerpt_tokens, F = su.follow_tokens;
  if (codecs.empty() || su.episodes < 1 || su.queries < 1 || su.first_query < 0 ||
      su.first_query + su.queries > su.episodes ||
      X < 2 || X > E || F < 1 || X + F - 1 > 2 * E || E > kMaxRecall) {
    return bad("recall fidelity: need codecs, 1 <= first query + queries <= episodes, 2 <= "
               "excerpt <= episode tokens <= " + std::to_string(kMaxRecall) +
               ", excerpt + follow <= 2 x episode tokens + 1");
  }

  // Streaming: the window holds one episode, so every streamed episode leaves it whole.
  RingConfig stream_ring{A, E, 0, EvictPolicy::kFifo};
  CpuForward streamer(model, pool, stream_ring, 64);
  const int64_t V = streamer.vocab_size();
  const std::vector<int32_t> ids = random_ids(A + (su.episodes + 1) * E, V, su.seed);
  CollectingSink sink;
  streamer.set_eviction_sink(&sink);
  std::vector<float> logits(static_cast<size_t>(V));  // the last position's, unused
  if (auto r = streamer.prefill(ids, logits.data()); !r.ok()) return r.error();
  streamer.set_eviction_sink(nullptr);
  const KvBlock& raw_all = sink.block;
  if (raw_all.size() != size_t(su.episodes * E)) return bad("recall fidelity: eviction count");

  // One store per codec setting, each fed the same evicted rows.
  std::vector<std::unique_ptr<memory::EpisodicMemory>> mems;
  std::vector<std::string> paths;
  struct Cleanup {
    std::vector<std::unique_ptr<memory::EpisodicMemory>>* mems;
    std::vector<std::string>* paths;
    ~Cleanup() {
      mems->clear();
      for (const auto& p : *paths) std::filesystem::remove(p);
    }
  } cleanup{&mems, &paths};
  for (size_t c = 0; c < codecs.size(); ++c) {
    memory::MemoryOptions opts;
    opts.path = su.dir + "/recall_fidelity_" + std::to_string(getpid()) + "_" +
                std::to_string(c) + ".mem";
    std::filesystem::remove(opts.path);
    paths.push_back(opts.path);
    opts.episode_tokens = uint32_t(E);
    opts.capacity = uint32_t(std::max(64, su.episodes));
    opts.recall_tokens = uint32_t(E);
    opts.srvq = codecs[c];
    opts.train_tokens = uint32_t(std::max(su.train_tokens, 1));
    auto m = memory::EpisodicMemory::open(model.config(), opts, {});
    if (!m.ok()) return m.error();
    for (int64_t e = 0; e < su.episodes; ++e) {
      std::vector<int64_t> pos(static_cast<size_t>(E));
      for (int64_t i = 0; i < E; ++i) pos[size_t(i)] = A + e * E + i;
      auto chunk = rows_at(raw_all, pos);
      if (!chunk.ok()) return chunk.error();
      if (auto r = m.value()->ingest(chunk.value()); !r.ok()) return r.error();
    }
    if (auto r = m.value()->flush(); !r.ok()) return r.error();
    if (m.value()->store().size() != size_t(su.episodes)) return bad("recall fidelity: stored");
    mems.push_back(std::move(m).value());
  }

  // Scoring: anchors, the recall tier (one episode) and a window for the excerpt and what
  // follows (nothing evicted while scoring).
  RingConfig score_ring{A, X + F, E, EvictPolicy::kFifo};
  CpuForward fwd(model, pool, score_ring, 64);
  // Feeds the excerpt but its last token, places rows (none: nothing), then the excerpt's last
  // token and the F - 1 that followed it: out [F, V], row j predicting the stream's token at
  // (the excerpt's first position) + X + j.
  std::vector<int32_t> tail(static_cast<size_t>(F));
  auto follow_logits = [&](std::span<const int32_t> excerpt, const KvBlock* rows,
                           std::vector<float>* out) -> Result<void> {
    fwd.reset();
    if (auto r = fwd.prefill(excerpt.first(size_t(X - 1)), logits.data()); !r.ok()) return r;
    if (rows != nullptr) {
      if (auto r = fwd.set_recall(*rows); !r.ok()) return r;
    }
    out->resize(size_t(F * V));
    return fwd.prefill(tail, out->data(), true);
  };

  FidelityReport rep;
  std::vector<Agreement> coded_agree(codecs.size());
  std::vector<RowError> k_err(codecs.size()), v_err(codecs.size());
  Agreement none_agree, repeat_agree;
  std::vector<float> raw_logits, other;
  for (int q = su.first_query; q < su.first_query + su.queries; ++q) {
    const int64_t p0 = A + int64_t(q) * E;  // the excerpt opens episode q
    const std::span<const int32_t> excerpt(ids.data() + p0, size_t(X));
    std::copy_n(ids.begin() + (p0 + X - 1), F, tail.begin());

    // Does the excerpt recall its episode first? (The placed rows below do not depend on it.)
    fwd.reset();
    if (auto r = fwd.prefill(excerpt.first(size_t(X - 1)), logits.data()); !r.ok()) {
      return r.error();
    }
    KvBlock query, recalled;
    if (auto r = fwd.read_kv(0, X - 1, &query); !r.ok()) return r.error();
    std::vector<memory::RecallHit> hits;
    if (auto r = mems[0]->recall(query, size_t(E), &recalled, &hits); !r.ok()) return r.error();
    rep.first_hits += !hits.empty() && hits[0].pos0 == p0;

    // The raw rows of episode q, as they were evicted.
    std::vector<int64_t> pos(static_cast<size_t>(E));
    for (int64_t i = 0; i < E; ++i) pos[size_t(i)] = p0 + i;
    auto raw = rows_at(raw_all, pos);
    if (!raw.ok()) return raw.error();
    if (auto r = follow_logits(excerpt, &raw.value(), &raw_logits); !r.ok()) return r.error();
    if (auto r = follow_logits(excerpt, &raw.value(), &other); !r.ok()) return r.error();
    repeat_agree.add(raw_logits.data(), other.data(), F, V);
    if (auto r = follow_logits(excerpt, nullptr, &other); !r.ok()) return r.error();
    none_agree.add(raw_logits.data(), other.data(), F, V);

    for (size_t c = 0; c < codecs.size(); ++c) {
      uint64_t id = 0;
      for (const memory::EpisodeInfo& info : mems[c]->store().list())
        if (info.pos0 == p0) id = info.id;
      if (id == 0) return bad("recall fidelity: no episode at " + std::to_string(p0));
      KvBlock coded;
      if (auto r = mems[c]->decode(id, &coded); !r.ok()) return r.error();
      if (coded.pos != raw.value().pos || coded.ids != raw.value().ids) {
        return bad("recall fidelity: episode at " + std::to_string(p0) + " decodes elsewhere");
      }
      for (size_t l = 0; l < coded.layers.size(); ++l) {
        k_err[c].add(raw.value().k[l], coded.k[l]);
        v_err[c].add(raw.value().v[l], coded.v[l]);
      }
      if (auto r = follow_logits(excerpt, &coded, &other); !r.ok()) return r.error();
      coded_agree[c].add(raw_logits.data(), other.data(), F, V);
    }
  }

  for (size_t c = 0; c < codecs.size(); ++c) {
    CodecFidelity f;
    f.srvq = codecs[c];
    // What the store spends: its payload per episode over the elements of the episode's rows.
    double elements = 0;
    for (size_t l = 0; l < raw_all.layers.size(); ++l)
      elements += 2.0 * double(raw_all.k[l].size()) / double(raw_all.size()) * double(E);
    f.bits_per_element = 8.0 * mems[c]->store().geometry().payload_bytes / elements;
    f.vs_raw = coded_agree[c].result();
    f.k_err = k_err[c].rel();
    f.v_err = v_err[c].rel();
    rep.codecs.push_back(f);
  }
  rep.none = none_agree.result();
  rep.repeat = repeat_agree.result();
  rep.positions = int(none_agree.n);
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace infer::bench
