// The episodic memory facade (episodic_memory.h).
#include "memory/episodic_memory.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "base/check.h"

namespace infer::memory {
namespace {

uint64_t fnv1a(uint64_t h, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}
template <class T>
uint64_t mix(uint64_t h, T v) {
  return fnv1a(h, &v, sizeof v);
}

int64_t system_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Codebook blob: u32 count, then per entry u32 length and bytes; entries are the codecs in
// codecs_ order, then the association's state (floats).
void put_entry(std::vector<uint8_t>& blob, const void* p, size_t n) {
  const uint32_t len = uint32_t(n);
  const auto* b = static_cast<const uint8_t*>(p);
  blob.insert(blob.end(), reinterpret_cast<const uint8_t*>(&len),
              reinterpret_cast<const uint8_t*>(&len) + 4);
  blob.insert(blob.end(), b, b + n);
}

}  // namespace

std::vector<TieredShape> tiered_shapes(const ModelConfig& cfg) {
  std::vector<TieredShape> s;
  for (size_t l = 0; l < cfg.layers.size(); ++l) {
    const LayerPlan& p = cfg.layers[l];
    if (p.type == LayerType::kFull && !p.kv_shared)
      s.push_back({int(l), p.num_key_value_heads, p.head_dim});
  }
  return s;
}

uint64_t model_fingerprint(const ModelConfig& cfg) {
  const TextConfig& t = cfg.text;
  uint64_t h = 0xcbf29ce484222325ULL;
  h = mix(h, t.vocab_size);
  h = mix(h, t.hidden_size);
  h = mix(h, t.num_hidden_layers);
  h = mix(h, t.num_attention_heads);
  h = mix(h, t.num_key_value_heads);
  h = mix(h, t.head_dim);
  h = mix(h, t.sliding_window);
  h = mix(h, t.hidden_size_per_layer_input);
  h = mix(h, t.num_kv_shared_layers);
  h = mix(h, t.attention_k_eq_v);
  h = mix(h, t.rms_norm_eps);
  for (const LayerPlan& p : cfg.layers) {
    h = mix(h, int(p.type));
    h = mix(h, p.head_dim);
    h = mix(h, p.num_key_value_heads);
    h = mix(h, p.kv_shared);
    h = mix(h, p.kv_source);
  }
  return h;
}

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
      builder_(opts.episode_tokens) {}

EpisodicMemory::~EpisodicMemory() = default;

Result<std::unique_ptr<EpisodicMemory>> EpisodicMemory::open(const ModelConfig& cfg,
                                                             const MemoryOptions& opts,
                                                             Detokenize detokenize, NowMs now) {
  std::vector<TieredShape> shapes = tiered_shapes(cfg);
  if (shapes.empty()) return Error{ErrorCode::kUnsupported, "episodic memory: no tiered layers"};
  std::unique_ptr<EpisodicMemory> m(
      new EpisodicMemory(shapes, opts, std::move(detokenize), std::move(now)));
  // The coded sizes depend only on the codec's configuration: learn a throwaway codec per head
  // dim from a few synthetic rows to ask it (and to size the room for the real ones).
  StoreGeometry g;
  g.model_fingerprint = model_fingerprint(cfg);
  g.capacity = opts.capacity;
  g.episode_tokens = opts.episode_tokens;
  g.key_floats = uint32_t(m->assoc_.key_floats());
  size_t row_bytes_per_token = 0, codebook_bytes = 64;
  for (const TieredShape& s : shapes) {
    SrvqConfig c = opts.srvq;
    c.dim = s.head_dim;
    c.iterations = 1;
    std::vector<float> rows(size_t(s.head_dim) * 512);
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = float((i * 2654435761u) % 2001) - 1000.0f;
    auto codec = SrvqCodec::train(c, rows);
    if (!codec.ok()) return codec.error();
    row_bytes_per_token += 2 * size_t(s.num_key_value_heads) * codec->row_bytes();
    codebook_bytes += 2 * (codec->serialize().size() + 4);
  }
  codebook_bytes += 4 + 4 * m->assoc_.state_floats() + 64;  // the association's state
  g.payload_bytes = uint32_t(row_bytes_per_token * opts.episode_tokens);
  g.codebook_bytes = uint32_t(codebook_bytes);
  auto st = EpisodeStore::open(opts.path, g);
  if (!st.ok()) return st.error();
  m->store_ = std::move(st).value();
  if (!m->store_->codebooks().empty()) {
    if (auto r = m->load_codebooks(m->store_->codebooks()); !r.ok()) return r.error();
  }
  return m;
}

std::vector<uint8_t> EpisodicMemory::codebooks_blob() const {
  std::vector<uint8_t> blob;
  const uint32_t count = uint32_t(codecs_.size() + 1);
  blob.insert(blob.end(), reinterpret_cast<const uint8_t*>(&count),
              reinterpret_cast<const uint8_t*>(&count) + 4);
  for (const SrvqCodec& c : codecs_) {
    const std::vector<uint8_t> b = c.serialize();
    put_entry(blob, b.data(), b.size());
  }
  const std::vector<float> s = assoc_.state();
  put_entry(blob, s.data(), s.size() * sizeof(float));
  return blob;
}

Result<void> EpisodicMemory::load_codebooks(std::span<const uint8_t> blob) {
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
  codecs_.clear();
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t len = 0;
    if (!u32(&len) || o + len > blob.size()) return bad("entry past the end");
    std::span<const uint8_t> e = blob.subspan(o, len);
    o += len;
    if (i + 1 < count) {
      auto c = SrvqCodec::deserialize(e);
      if (!c.ok()) return c.error();
      codecs_.push_back(std::move(c).value());
    } else {
      if (len % sizeof(float) != 0) return bad("association state not floats");
      std::vector<float> s(len / sizeof(float));
      std::memcpy(s.data(), e.data(), len);
      if (auto r = assoc_.set_state(s); !r.ok()) return r;
    }
  }
  return {};
}

Result<void> EpisodicMemory::train(const KvBlock& rows) {
  codecs_.clear();
  for (size_t l = 0; l < shapes_.size(); ++l) {
    SrvqConfig c = opts_.srvq;
    c.dim = shapes_[l].head_dim;
    // rows.k[l] is [n, n_kv * d] = [n * n_kv, d]: every head's row is a training row.
    for (const auto* src : {&rows.k[l], &rows.v[l]}) {
      auto codec = SrvqCodec::train(c, *src);
      if (!codec.ok()) return codec.error();
      codecs_.push_back(std::move(codec).value());
    }
  }
  assoc_.fit(rows);
  const std::vector<uint8_t> blob = codebooks_blob();
  return store_->set_codebooks(blob);
}

uint64_t EpisodicMemory::weakest(int64_t now) const {
  uint64_t id = 0;
  double worst = 0;
  for (const EpisodeInfo& i : store_->list()) {
    const double s = opts_.rule.strength_now(i.strength, std::max(i.written_ms, i.recalled_ms), now);
    if (id == 0 || s < worst) id = i.id, worst = s;
  }
  return id;
}

Result<void> EpisodicMemory::store_episode(const KvBlock& b) {
  const int64_t now = now_();
  Episode e;
  e.info.pos0 = b.pos.front();
  e.info.n_tokens = uint32_t(b.size());
  e.info.written_ms = now;
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
  e.key.resize(assoc_.key_floats());
  assoc_.episode_key(b, 0, b.size(), e.key.data());
  e.payload.assign(store_->geometry().payload_bytes, 0);
  // Payload: token-major; per token, per tiered layer, K heads then V heads, each a coded row.
  size_t o = 0;
  for (size_t t = 0; t < b.size(); ++t) {
    for (size_t l = 0; l < shapes_.size(); ++l) {
      const size_t d = size_t(shapes_[l].head_dim), rf = size_t(shapes_[l].row_floats());
      for (int kv = 0; kv < 2; ++kv) {
        const SrvqCodec& c = codecs_[l * 2 + size_t(kv)];
        const float* row = (kv == 0 ? b.k[l] : b.v[l]).data() + t * rf;
        for (size_t h = 0; h < rf; h += d) {
          INFER_CHECK(o + c.row_bytes() <= e.payload.size(), "episodic memory: payload size");
          c.encode(row + h, e.payload.data() + o);
          o += c.row_bytes();
        }
      }
    }
  }
  const uint64_t victim = store_->size() >= store_->geometry().capacity ? weakest(now) : 0;
  auto r = store_->append(e, victim);
  if (!r.ok()) return r.error();
  return {};
}

Result<size_t> EpisodicMemory::ingest(const KvBlock& b) {
  std::vector<KvBlock> done;
  builder_.add(b, &done);
  size_t stored = 0;
  if (codecs_.empty()) {
    for (auto& e : done) {
      seen_tokens_ += e.size();
      waiting_.push_back(std::move(e));
    }
    if (seen_tokens_ < opts_.train_tokens) return stored;
    KvBlock rows;
    for (const KvBlock& e : waiting_)
      for (size_t i = 0; i < e.size(); ++i) append_token(e, i, &rows);
    if (auto r = train(rows); !r.ok()) return r.error();
    done = std::move(waiting_);
    waiting_.clear();
  }
  for (const KvBlock& e : done) {
    if (auto r = store_episode(e); !r.ok()) return r.error();
    ++stored;
  }
  return stored;
}

Result<size_t> EpisodicMemory::flush() {
  std::vector<KvBlock> done;
  builder_.flush(&done);
  for (auto& e : done) waiting_.push_back(std::move(e));
  if (waiting_.empty()) return size_t(0);
  if (codecs_.empty()) {
    KvBlock rows;
    for (const KvBlock& e : waiting_)
      for (size_t i = 0; i < e.size(); ++i) append_token(e, i, &rows);
    if (auto r = train(rows); !r.ok()) return r.error();
  }
  size_t stored = 0;
  for (const KvBlock& e : waiting_) {
    if (auto r = store_episode(e); !r.ok()) return r.error();
    ++stored;
  }
  waiting_.clear();
  return stored;
}

Result<size_t> EpisodicMemory::end_stream() {
  Result<size_t> stored = flush();
  builder_ = EpisodeBuilder(opts_.episode_tokens);
  return stored;
}

void EpisodicMemory::decode_episode(const Episode& e, KvBlock* out) const {
  const size_t n = e.ids.size();
  std::vector<float> row;
  size_t o = 0;
  std::vector<std::vector<float>> k(shapes_.size()), v(shapes_.size());
  for (size_t t = 0; t < n; ++t) {
    out->pos.push_back(e.info.pos0 + int64_t(t));
    out->ids.push_back(e.ids[t]);
    for (size_t l = 0; l < shapes_.size(); ++l) {
      const size_t d = size_t(shapes_[l].head_dim), rf = size_t(shapes_[l].row_floats());
      for (int kv = 0; kv < 2; ++kv) {
        const SrvqCodec& c = codecs_[l * 2 + size_t(kv)];
        auto& dst = kv == 0 ? out->k[l] : out->v[l];
        const size_t at = dst.size();
        dst.resize(at + rf);
        for (size_t h = 0; h < rf; h += d) {
          c.decode(e.payload.data() + o, dst.data() + at + h);
          o += c.row_bytes();
        }
      }
    }
  }
}

Result<void> EpisodicMemory::decode(uint64_t id, KvBlock* out) const {
  *out = KvBlock{};
  for (const auto& s : shapes_) out->layers.push_back(s.layer);
  out->k.assign(shapes_.size(), {});
  out->v.assign(shapes_.size(), {});
  if (codecs_.empty()) {
    return Error{ErrorCode::kInvalidArgument, "episodic memory: no codebooks yet"};
  }
  auto e = store_->read(id);
  if (!e.ok()) return e.error();
  decode_episode(e.value(), out);
  return {};
}

Result<void> EpisodicMemory::recall(const KvBlock& query, size_t max_tokens, KvBlock* out,
                                    std::vector<RecallHit>* hits) {
  *out = KvBlock{};
  for (const auto& s : shapes_) out->layers.push_back(s.layer);
  out->k.assign(shapes_.size(), {});
  out->v.assign(shapes_.size(), {});
  if (hits) hits->clear();
  if (query.size() == 0 || codecs_.empty() || !assoc_.fitted()) return {};
  const int64_t now = now_();
  std::vector<float> q(assoc_.query_floats());
  assoc_.query_key(query, 0, query.size(), q.data());
  struct Scored {
    EpisodeInfo info;
    float association;
    double score;
  };
  std::vector<Scored> scored;
  store_->for_each_key([&](const EpisodeInfo& info, std::span<const float> key) {
    const float a = assoc_.association(q.data(), key.data());
    if (a < opts_.min_association) return;
    scored.push_back({info, a,
                      opts_.rule.score(a, info.strength,
                                       std::max(info.written_ms, info.recalled_ms), now)});
  });
  std::sort(scored.begin(), scored.end(),
            [](const Scored& a, const Scored& b) { return a.score > b.score; });
  const size_t budget = std::min<size_t>(max_tokens, opts_.recall_tokens);
  for (const Scored& s : scored) {
    if (out->size() + s.info.n_tokens > budget) continue;  // whole episodes only
    auto e = store_->read(s.info.id);
    if (!e.ok()) return e.error();
    decode_episode(e.value(), out);
    const float strength = opts_.rule.after_recall(
        s.info.strength, std::max(s.info.written_ms, s.info.recalled_ms), now);
    if (auto r = store_->touch(s.info.id, strength, now, s.info.recalls + 1); !r.ok()) return r;
    if (hits) {
      hits->push_back({s.info.id, s.info.pos0, s.info.n_tokens, s.association, s.score, strength});
    }
  }
  return {};
}

}  // namespace infer::memory
