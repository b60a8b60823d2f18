// Episodes from incoming tokens (episode_builder.h).
#include "memory/episode_builder.h"

#include "base/check.h"

namespace infer::memory {

void append_token(const KvBlock& src, size_t i, KvBlock* dst) {
  INFER_CHECK(i < src.size(), "append_token: token out of the block");
  if (dst->layers.empty()) {
    dst->layers = src.layers;
    dst->k.assign(src.layers.size(), {});
    dst->v.assign(src.layers.size(), {});
  }
  INFER_CHECK(dst->layers == src.layers, "append_token: blocks of different layers");
  dst->pos.push_back(src.pos[i]);
  dst->ids.push_back(src.ids[i]);
  const size_t n = src.size();
  for (size_t l = 0; l < src.layers.size(); ++l) {
    const size_t rf = src.k[l].size() / n;
    INFER_CHECK(src.k[l].size() == n * rf && src.v[l].size() == n * rf, "append_token: rows");
    dst->k[l].insert(dst->k[l].end(), src.k[l].begin() + ptrdiff_t(i * rf),
                     src.k[l].begin() + ptrdiff_t((i + 1) * rf));
    dst->v[l].insert(dst->v[l].end(), src.v[l].begin() + ptrdiff_t(i * rf),
                     src.v[l].begin() + ptrdiff_t((i + 1) * rf));
  }
}

EpisodeBuilder::EpisodeBuilder(size_t episode_tokens) : n_(episode_tokens) {
  INFER_CHECK(n_ > 0, "episode builder: episodes of 0 tokens");
}

void EpisodeBuilder::add(const KvBlock& b, std::vector<KvBlock>* done) {
  for (size_t i = 0; i < b.size(); ++i) {
    if (b.pos[i] <= last_) continue;
    append_token(b, i, &tail_);
    last_ = b.pos[i];
    if (tail_.size() == n_) {
      done->push_back(std::move(tail_));
      tail_ = KvBlock{};
    }
  }
}

void EpisodeBuilder::flush(std::vector<KvBlock>* done) {
  if (tail_.size() == 0) return;
  done->push_back(std::move(tail_));
  tail_ = KvBlock{};
}

}  // namespace infer::memory
