// Logit fidelity of recalled rows (issue 29, "what must be shown": Fidelity). Random token text
// is streamed through the CPU ring so that whole episodes leave the window; their raw rows are
// kept and stored, coded, through EpisodicMemory (one store per codec setting; the codecs learn
// from the first train_tokens, so later episodes are coded unseen). Then, for an excerpt of
// episode k: a fresh context takes the excerpt but its last token, the episode's rows are placed
// with set_recall, and the excerpt's last token and the 63 tokens that followed it in the stream
// are fed teacher-forced; the 64 rows of logits this gives with the coded rows are compared with
// those given by the same rows uncompressed (KL(raw || coded), greedy agreement). The same
// comparison against no recall at all says how much the recall moves the logits in the first
// place, and the raw rows run twice must agree exactly (the measurement's own check).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "memory/srvq.h"
#include "model/kv_ring_api.h"
#include "model/model.h"
#include "model/thread_pool.h"

namespace infer::bench {

struct FidelitySetup {
  // Streamed and stored, handed to EpisodicMemory one episode at a time as the eviction sink
  // does: the codecs learn from the first 256 tokens (4 episodes) and code the rest unseen.
  int episodes = 8;
  int train_tokens = 256;   // MemoryOptions::train_tokens: rows the codecs learn from
  int episode_tokens = 64;  // one recall places one episode
  int excerpt_tokens = 16;  // the query: tokens of episode k
  int follow_tokens = 64;   // scored positions after the recall
  int first_query = 4;      // queries: episodes first_query .. first_query + queries - 1
  int queries = 4;
  uint64_t seed = 1;        // the token text
  std::string dir = "/tmp";  // where the stores go (one file per codec, removed afterwards)
};

// Logits of one variant against the raw rows' logits.
struct LogitAgreement {
  double kl_mean = 0;  // nats, over every scored position of every query
  double kl_max = 0;
  double greedy = 0;   // fraction of positions whose argmax is the raw rows' argmax
};

struct CodecFidelity {
  memory::SrvqConfig srvq;
  double bits_per_element = 0;
  LogitAgreement vs_raw;
  double k_err = 0, v_err = 0;  // relative L2 error of the placed rows against the raw rows
};

struct FidelityReport {
  std::vector<CodecFidelity> codecs;
  LogitAgreement none;    // no recall against the raw rows
  LogitAgreement repeat;  // the raw rows placed a second time: exactly 0 / 1, else a bug
  int positions = 0;      // scored positions (queries x follow_tokens)
  int first_hits = 0;     // queries whose excerpt recalled its own episode first (first codec)
  double seconds = 0;
};

// Keeps the rows of every token a ring evicts.
class CollectingSink final : public EvictionSink {
 public:
  void on_evict(std::span<const EvictedToken> tokens, const KvRows& rows) override {
    block.append(tokens, rows);
  }
  KvBlock block;
};

// n ids drawn uniformly from [4, V) (no special tokens), deterministic in seed.
std::vector<int32_t> random_ids(int64_t n, int64_t V, uint64_t seed);
// The tokens of `all` at positions pos (each must be in all), rows included.
Result<KvBlock> rows_at(const KvBlock& all, std::span<const int64_t> pos);
// KL(p || q) of softmax(p_logits), softmax(q_logits) over n entries, in nats.
double kl_divergence(const float* p_logits, const float* q_logits, int64_t n);

// codecs: the settings measured (dim is set per layer by EpisodicMemory).
Result<FidelityReport> measure_fidelity(const Model& model, ThreadPool& pool,
                                        const FidelitySetup& setup,
                                        std::span<const memory::SrvqConfig> codecs);

}  // namespace infer::bench
