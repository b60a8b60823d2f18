// The episodic memory facade (episodic_memory.h).
#include "memory/episodic_memory.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "base/check.h"

namespace infer::memory {
namespace {

int64_t system_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Codebook blob: u32 count, then per entry u32 length and bytes; entries are the codecs in
// Learned::codecs order, then the association's state (floats). Sized once and filled with
// memcpy: growing it with vector::insert of 4-byte ranges made GCC 12 warn (-Wstringop-overflow
// on the inlined memmove of the reallocation, an impossible path), and each entry's length must
// fit its u32 anyway, which this checks.
std::vector<uint8_t> make_blob(const std::vector<std::span<const uint8_t>>& entries) {
  size_t total = 4;
  for (const auto& e : entries) {
    INFER_CHECK(e.size() <= UINT32_MAX, "episodic memory: codebook entry past 4 GiB");
    total += 4 + e.size();
  }
  std::vector<uint8_t> blob(total);
  const uint32_t count = uint32_t(entries.size());
  std::memcpy(blob.data(), &count, 4);
  size_t o = 4;
  for (const auto& e : entries) {
    const uint32_t len = uint32_t(e.size());
    std::memcpy(blob.data() + o, &len, 4);
    if (!e.empty()) std::memcpy(blob.data() + o + 4, e.data(), e.size());
    o += 4 + e.size();
  }
  return blob;
}

}  // namespace

EpisodicMemory::EpisodicMemory(std::vector<TieredShape> shapes, const MemoryOptions& opts,
                               Detokenize d, NowMs now)
    : shapes_(std::move(shapes)),
      opts_(opts),
      detokenize_(std::move(d)),
      now_(now ? std::move(now) : NowMs(system_now_ms)),
      assoc_(opts.association,
             [&] {
               std::vector<int> v;
               for (const auto& s : shapes_) v.push_back(s.row_floats());
               return v;
             }(),
             [&] {
               std::vector<int> v;
               for (const auto& s : shapes_) v.push_back(s.head_dim);
               return v;
             }()),
      builder_(opts.episode_tokens) {
  if (opts.recall_threads > 1) recall_pool_ = std::make_unique<ThreadPool>(opts.recall_threads);
}

EpisodicMemory::~EpisodicMemory() = default;

Result<std::unique_ptr<EpisodicMemory>> EpisodicMemory::open(const ModelConfig& cfg,
                                                             const MemoryOptions& opts,
                                                             Detokenize detokenize, NowMs now) {
  std::vector<TieredShape> shapes = tiered_shapes(cfg);
  if (shapes.empty()) return Error{ErrorCode::kUnsupported, "episodic memory: no tiered layers"};
  std::unique_ptr<EpisodicMemory> m(
      new EpisodicMemory(shapes, opts, std::move(detokenize), std::move(now)));
  // The coded sizes follow from the codec's configuration alone (and size the room for the
  // codebooks: codebooks_blob's entries, with 64 bytes of slack either side).
  StoreGeometry g;
  g.model_fingerprint = model_fingerprint(cfg);
  g.capacity = opts.capacity;
  g.episode_tokens = opts.episode_tokens;
  g.key_floats = uint32_t(m->assoc_.key_floats());
  size_t row_bytes_per_token = 0, codebook_bytes = 64;
  for (const TieredShape& s : shapes) {
    SrvqConfig c = opts.srvq;
    c.dim = s.head_dim;
    INFER_TRY(const SrvqSizes sizes, SrvqCodec::sizes(c));
    row_bytes_per_token += 2 * size_t(s.num_key_value_heads) * sizes.row_bytes;
    codebook_bytes += 2 * (sizes.blob_bytes + 4);
  }
  codebook_bytes += 4 + 4 * m->assoc_.state_floats() + 64;  // the association's state
  g.payload_bytes = uint32_t(row_bytes_per_token * opts.episode_tokens);
  g.codebook_bytes = uint32_t(codebook_bytes);
  m->payload_bytes_ = g.payload_bytes;
  auto st = EpisodeStore::open(opts.path, g);
  if (!st.ok()) return st.error();
  m->store_ = std::move(st).value();
  m->index_.load(*m->store_);
  if (!m->store_->codebooks().empty()) {
    INFER_TRY(m->learned_, m->load_codebooks(m->store_->codebooks()));
    m->coder_ = m->learned_;
  }
  return m;
}

std::vector<uint8_t> EpisodicMemory::codebooks_blob(const Learned& l) const {
  std::vector<std::vector<uint8_t>> codecs;
  std::vector<std::span<const uint8_t>> entries;
  for (const SrvqCodec& c : l.codecs) codecs.push_back(c.serialize());
  for (const auto& c : codecs) entries.emplace_back(c);
  const std::vector<float> s = l.assoc.state();
  entries.emplace_back(reinterpret_cast<const uint8_t*>(s.data()), s.size() * sizeof(float));
  return make_blob(entries);
}

Result<std::shared_ptr<const Learned>> EpisodicMemory::load_codebooks(
    std::span<const uint8_t> blob) const {
  auto bad = [&](const char* what) {
    return Error{ErrorCode::kParse, std::string("episodic memory codebooks: ") + what};
  };
  size_t o = 0;
  auto u32 = [&](uint32_t* v) {
    if (o + 4 > blob.size()) return false;
    std::memcpy(v, blob.data() + o, 4);
    o += 4;
    return true;
  };
  uint32_t count = 0;
  if (!u32(&count) || count != shapes_.size() * 2 + 1) return bad("wrong number of entries");
  auto learned = std::make_shared<Learned>(Learned{{}, assoc_, {blob.begin(), blob.end()}});
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t len = 0;
    if (!u32(&len) || o + len > blob.size()) return bad("entry past the end");
    std::span<const uint8_t> e = blob.subspan(o, len);
    o += len;
    if (i + 1 < count) {
      auto c = SrvqCodec::deserialize(e);
      if (!c.ok()) return c.error();
      learned->codecs.push_back(std::move(c).value());
    } else {
      if (len % sizeof(float) != 0) return bad("association state not floats");
      std::vector<float> s(len / sizeof(float));
      std::memcpy(s.data(), e.data(), len);
      INFER_TRY_VOID(learned->assoc.set_state(s));
    }
  }
  return std::shared_ptr<const Learned>(std::move(learned));
}

Result<std::shared_ptr<const Learned>> EpisodicMemory::train(const KvBlock& rows) const {
  auto learned = std::make_shared<Learned>(Learned{{}, assoc_, {}});
  for (size_t l = 0; l < shapes_.size(); ++l) {
    SrvqConfig c = opts_.srvq;
    c.dim = shapes_[l].head_dim;
    // rows.k[l] is [n, n_kv * d] = [n * n_kv, d]: every head's row is a training row.
    for (const auto* src : {&rows.k[l], &rows.v[l]}) {
      auto codec = SrvqCodec::train(c, *src);
      if (!codec.ok()) return codec.error();
      learned->codecs.push_back(std::move(codec).value());
    }
  }
  learned->assoc.fit(rows);
  learned->blob = codebooks_blob(*learned);
  return std::shared_ptr<const Learned>(std::move(learned));
}

const EpisodeInfo* EpisodicMemory::weakest(int64_t now) const {
  const EpisodeInfo* w = nullptr;
  double worst = 0;
  for (size_t k = 0; k < index_.size(); ++k) {
    const EpisodeInfo& i = index_.info(k);
    const double s = opts_.rule.strength_now(i.strength, std::max(i.written_ms, i.recalled_ms), now);
    if (w == nullptr || s < worst) w = &i, worst = s;
  }
  return w;
}

Episode EpisodicMemory::encode_episode(const Learned& learned, const KvBlock& b) const {
  Episode e;
  e.info.pos0 = b.pos.front();
  e.info.n_tokens = uint32_t(b.size());
  e.info.written_ms = now_();
  e.info.strength = 1.0f;
  if (detokenize_) {
    e.info.preview = detokenize_(b.ids);
    if (e.info.preview.size() > kPreviewBytes) {
      size_t cut = kPreviewBytes;
      while (cut > 0 && (uint8_t(e.info.preview[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 boundary
      e.info.preview.resize(cut);
    }
  }
  e.ids = b.ids;
  e.key.resize(learned.assoc.key_floats());
  const size_t parts = size_t(std::max(1, opts_.association.sub_spans));
  if (b.size() >= parts) {
    learned.assoc.episode_key(b, 0, b.size(), e.key.data());
  } else {  // a short tail (MEMORY_STORE, a quiet span): its last token repeats to fill the parts
    KvBlock filled;
    for (size_t i = 0; i < parts; ++i) append_token(b, std::min(i, b.size() - 1), &filled);
    learned.assoc.episode_key(filled, 0, parts, e.key.data());
  }
  e.payload.assign(payload_bytes_, 0);
  // Payload: token-major; per token, per tiered layer, K heads then V heads, each a coded row.
  size_t o = 0;
  for (size_t t = 0; t < b.size(); ++t) {
    for (size_t l = 0; l < shapes_.size(); ++l) {
      const size_t d = size_t(shapes_[l].head_dim), rf = size_t(shapes_[l].row_floats());
      for (int kv = 0; kv < 2; ++kv) {
        const SrvqCodec& c = learned.codecs[l * 2 + size_t(kv)];
        const float* row = (kv == 0 ? b.k[l] : b.v[l]).data() + t * rf;
        for (size_t h = 0; h < rf; h += d) {
          INFER_CHECK(o + c.row_bytes() <= e.payload.size(), "episodic memory: payload size");
          c.encode(row + h, e.payload.data() + o);
          o += c.row_bytes();
        }
      }
    }
  }
  return e;
}

Result<PreparedEpisodes> EpisodicMemory::prepare(std::vector<KvBlock> done, bool flush) {
  PreparedEpisodes p;
  for (auto& e : done) {
    seen_tokens_ += e.size();
    waiting_.push_back(std::move(e));
  }
  if (waiting_.empty()) return p;
  if (!coder_) {
    if (!flush && seen_tokens_ < opts_.train_tokens) return p;
    KvBlock rows;
    for (const KvBlock& e : waiting_)
      for (size_t i = 0; i < e.size(); ++i) append_token(e, i, &rows);
    INFER_TRY(coder_, train(rows));
  }
  p.learned = coder_;
  for (const KvBlock& e : waiting_) {
    if (opts_.before_encode) opts_.before_encode();
    p.episodes.push_back(encode_episode(*coder_, e));
  }
  waiting_.clear();
  return p;
}

Result<PreparedEpisodes> EpisodicMemory::prepare_ingest(const KvBlock& b) {
  std::vector<KvBlock> done;
  builder_.add(b, &done);
  return prepare(std::move(done), false);
}

Result<PreparedEpisodes> EpisodicMemory::prepare_flush() {
  std::vector<KvBlock> done;
  builder_.flush(&done);
  return prepare(std::move(done), true);
}

Result<PreparedEpisodes> EpisodicMemory::prepare_end_stream() {
  Result<PreparedEpisodes> p = prepare_flush();
  builder_ = EpisodeBuilder(opts_.episode_tokens);
  return p;
}

// The codebooks go in first, on the first commit (or again after a failed one), so the store
// never holds an episode it cannot decode.
Result<size_t> EpisodicMemory::commit(PreparedEpisodes p) {
  if (p.episodes.empty()) return size_t(0);
  INFER_CHECK(p.learned != nullptr, "episodic memory: episodes prepared without codecs");
  INFER_CHECK(!learned_ || learned_ == p.learned, "episodic memory: prepared with other codecs");
  if (store_->codebooks().empty()) INFER_TRY_VOID(store_->set_codebooks(p.learned->blob));
  learned_ = std::move(p.learned);
  size_t stored = 0;
  for (const Episode& e : p.episodes) {
    EpisodeInfo replaced;  // id 0: none
    if (store_->size() >= store_->geometry().capacity) {
      if (const EpisodeInfo* w = weakest(now_())) replaced = *w;
    }
    const uint64_t victim = replaced.id;
    auto r = store_->append(e, victim);
    if (!r.ok()) return r.error();
    index_.remove(victim);
    EpisodeInfo added = e.info;
    added.id = r.value();
    index_.put(added, e.key);
    if (victim != 0) {
      report({MemoryEvent::kReplaced, victim, replaced.pos0, replaced.n_tokens, 0, 0,
              strength_now(replaced)});
    }
    report({MemoryEvent::kStored, r.value(), e.info.pos0, e.info.n_tokens, 0, 0, e.info.strength});
    ++stored;
  }
  return stored;
}

Result<size_t> EpisodicMemory::ingest(const KvBlock& b) {
  INFER_TRY(PreparedEpisodes p, prepare_ingest(b));
  return commit(std::move(p));
}

Result<size_t> EpisodicMemory::flush() {
  INFER_TRY(PreparedEpisodes p, prepare_flush());
  return commit(std::move(p));
}

Result<size_t> EpisodicMemory::end_stream() {
  INFER_TRY(PreparedEpisodes p, prepare_end_stream());
  return commit(std::move(p));
}

}  // namespace infer::memory
