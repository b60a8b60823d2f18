// The episodic memory's recall side (episodic_memory.h): decoding stored episodes, scoring the
// store against a query, and what a recall or a forget commits. Ingestion is episodic_memory.cpp.
#include <algorithm>
#include <chrono>
#include <cstdint>

#include "memory/episodic_memory.h"

namespace infer::memory {
namespace {

using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

void EpisodicMemory::decode_episode(const Learned& learned, const Episode& e, KvBlock* out,
                                    ThreadPool* pool) const {
  const size_t n = e.ids.size();
  // Each token's codes are one run of the payload (every layer's K heads, then its V heads), the
  // same length for every token, and its rows land in slots of their own: tokens decode apart.
  size_t token_bytes = 0;
  std::vector<size_t> at(shapes_.size());
  for (size_t l = 0; l < shapes_.size(); ++l) {
    const size_t heads = size_t(shapes_[l].row_floats() / shapes_[l].head_dim);
    token_bytes += heads * (learned.codecs[l * 2].row_bytes() + learned.codecs[l * 2 + 1].row_bytes());
    at[l] = out->k[l].size();
    out->k[l].resize(at[l] + n * size_t(shapes_[l].row_floats()));
    out->v[l].resize(at[l] + n * size_t(shapes_[l].row_floats()));
  }
  for (size_t t = 0; t < n; ++t) {
    out->pos.push_back(e.info.pos0 + int64_t(t));
    out->ids.push_back(e.ids[t]);
  }
  auto decode_tokens = [&](int64_t t0, int64_t t1) {
    for (size_t t = size_t(t0); t < size_t(t1); ++t) {
      size_t o = t * token_bytes;
      for (size_t l = 0; l < shapes_.size(); ++l) {
        const size_t d = size_t(shapes_[l].head_dim), rf = size_t(shapes_[l].row_floats());
        for (int kv = 0; kv < 2; ++kv) {
          const SrvqCodec& c = learned.codecs[l * 2 + size_t(kv)];
          float* dst = (kv == 0 ? out->k[l] : out->v[l]).data() + at[l] + t * rf;
          for (size_t h = 0; h < rf; h += d) {
            c.decode(e.payload.data() + o, dst + h);
            o += c.row_bytes();
          }
        }
      }
    }
  };
  if (pool != nullptr && pool->size() > 1 && n > 1) {
    pool->parallel_for(int64_t(n), decode_tokens);
  } else {
    decode_tokens(0, int64_t(n));
  }
}

Result<void> EpisodicMemory::decode(uint64_t id, KvBlock* out) const {
  *out = KvBlock{};
  for (const auto& s : shapes_) out->layers.push_back(s.layer);
  out->k.assign(shapes_.size(), {});
  out->v.assign(shapes_.size(), {});
  const std::shared_ptr<const Learned> learned = learned_;
  if (!learned) return Error{ErrorCode::kInvalidArgument, "episodic memory: no codebooks yet"};
  auto e = store_->read(id);
  if (!e.ok()) return e.error();
  decode_episode(*learned, e.value(), out, nullptr);
  return {};
}

Result<void> EpisodicMemory::recall(const KvBlock& query, size_t max_tokens, KvBlock* out,
                                    std::vector<RecallHit>* hits) {
  *out = KvBlock{};
  for (const auto& s : shapes_) out->layers.push_back(s.layer);
  out->k.assign(shapes_.size(), {});
  out->v.assign(shapes_.size(), {});
  if (hits) hits->clear();
  profile_ = RecallProfile{};
  const std::shared_ptr<const Learned> learned = learned_;
  if (query.size() == 0 || !learned || !learned->assoc.fitted()) return {};
  const Association& assoc = learned->assoc;
  const int64_t now = now_();
  const Clock::time_point t0 = Clock::now();
  query_key_.resize(assoc.query_floats());
  const size_t parts =
      assoc.query_key(query, 0, query.size(), query_key_.data(), recall_pool_.get());
  const Clock::time_point t1 = Clock::now();
  SelectOptions so;
  so.min_association = opts_.min_association;
  so.budget_tokens = std::min<size_t>(max_tokens, opts_.recall_tokens);
  so.rule = opts_.rule;
  so.now_ms = now;
  so.exact = exact_recall_;
  selector_.select(assoc, index_, query_key_.data(), parts, so, &picks_);
  const Clock::time_point t2 = Clock::now();
  for (const RecallPick& p : picks_) {
    const EpisodeInfo& info = index_.info(p.index);
    auto e = store_->read(info.id);
    if (!e.ok()) return e.error();
    decode_episode(*learned, e.value(), out, recall_pool_.get());
    const float strength = opts_.rule.after_recall(
        info.strength, std::max(info.written_ms, info.recalled_ms), now);
    if (hits) {
      hits->push_back({info.id, info.pos0, info.n_tokens, p.association, p.score, strength,
                       info.written_ms, now, info.recalls + 1});
    }
    report({MemoryEvent::kRecalled, info.id, info.pos0, info.n_tokens, p.score, p.association,
            strength});
  }
  profile_ = {ms_between(t0, t1), ms_between(t1, t2), ms_between(t2, Clock::now()),
              selector_.rescored(), selector_.fell_back()};
  return {};
}

Result<void> EpisodicMemory::strengthen(std::span<const RecallHit> hits) {
  for (const RecallHit& h : hits) {
    // Forgotten or replaced since the recall: nothing to strengthen.
    if (auto r = store_->touch(h.id, h.strength, h.recalled_ms, h.recalls);
        !r.ok() && r.error().code != ErrorCode::kNotFound) {
      return r;
    }
    index_.touch(h.id, h.strength, h.recalled_ms, h.recalls);
  }
  return {};
}

Result<void> EpisodicMemory::forget(uint64_t id) {
  EpisodeInfo gone;
  for (const EpisodeInfo& i : store_->list()) {
    if (i.id == id) gone = i;
  }
  if (gone.id == 0) {
    return make_error(ErrorCode::kNotFound, store_->path() + ": no episode " + std::to_string(id));
  }
  if (auto r = store_->forget(id); !r.ok()) return r;
  index_.remove(id);
  report({MemoryEvent::kForgotten, id, gone.pos0, gone.n_tokens, 0, 0, strength_now(gone)});
  return {};
}

float EpisodicMemory::strength_now(const EpisodeInfo& i) const {
  return float(opts_.rule.strength_now(i.strength, std::max(i.written_ms, i.recalled_ms), now_()));
}

}  // namespace infer::memory
