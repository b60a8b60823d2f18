// What episodic memory costs outside the decode loop (issue 29, "Cost"): the store's checksum
// (crc32 against boost's byte-wise one), opening a store of N episodes (and its file size per
// episode), encoding: per row at head dims 256 and 512, per episode and the one-time training
// on a model's tiered shapes, and a turn's recall with N episodes stored, phase by phase (no
// model: synthetic rows in its tiered shapes). Usage:
//   memory_bench [--config configs/e2b.json] [--episodes 10000] [--dir /tmp] [--recall-only]
//                [--threads N]  (a recall's threads, MemoryOptions::recall_threads; default 1)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <boost/crc.hpp>
#include <unistd.h>

#include "memory/crc32.h"
#include "memory/episode_store.h"
#include "memory/episodic_memory.h"
#include "memory/srvq.h"
#include "memory/store_format.h"
#include "model/config.h"
#include "test/memory/kv_rows.h"

using namespace infer;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

void bench_crc() {
  std::vector<uint8_t> buf(64 << 20);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = uint8_t((i * 2654435761u) >> 13);
  double best_new = 1e9, best_boost = 1e9;
  uint32_t a = 0, b = 0;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = Clock::now();
    a = memory::crc32(buf.data(), buf.size());
    best_new = std::min(best_new, ms_since(t0));
    t0 = Clock::now();
    boost::crc_32_type c;
    c.process_bytes(buf.data(), buf.size());
    b = c.checksum();
    best_boost = std::min(best_boost, ms_since(t0));
  }
  const double mb = double(buf.size()) / 1e6;
  std::printf("crc32 of 64 MiB: slicing-by-16 %.1f ms (%.0f MB/s), boost %.1f ms (%.0f MB/s)%s\n",
              best_new, mb / best_new * 1e3, best_boost, mb / best_boost * 1e3,
              a == b ? "" : "  MISMATCH");
}

// Fills a store of geometry g with n episodes, then times a fresh open (best of 3; the file is
// in the page cache, as after a recent session).
void bench_open(const std::string& path, const memory::StoreGeometry& g, const char* what) {
  std::filesystem::remove(path);
  {
    auto s = memory::EpisodeStore::open(path, g);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.error().message.c_str());
      std::exit(1);
    }
    memory::Episode e;
    e.ids.assign(g.episode_tokens, 7);
    e.key.assign(g.key_floats, 0.25f);
    e.payload.assign(g.payload_bytes, 0x5a);
    e.info.preview = "an episode";
    for (uint32_t i = 0; i < g.capacity; ++i) {
      e.info.pos0 = int64_t(i) * g.episode_tokens;
      e.payload[i % g.payload_bytes] ^= 1;
      if (auto r = (*s)->append(e, 0); !r.ok()) {
        std::fprintf(stderr, "%s\n", r.error().message.c_str());
        std::exit(1);
      }
    }
  }
  double best = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = Clock::now();
    auto s = memory::EpisodeStore::open(path, g);
    best = std::min(best, ms_since(t0));
    if (!s.ok() || (*s)->size() != g.capacity) std::exit(1);
  }
  const uint64_t bytes = std::filesystem::file_size(path);
  std::printf("open of %u episodes, %s: %.1f ms (file %.1f MB, %.0f bytes per episode)\n",
              g.capacity, what, best, double(bytes) / 1e6, double(bytes) / g.capacity);
  // The checksums an open verifies (every record; the header pages are small), with each CRC:
  // what the open cost with boost's is this open's time plus the difference.
  std::vector<uint8_t> file(bytes);
  std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(file.data()), long(bytes));
  const memory::format::Layout l = *memory::format::layout_of(g);
  double crc_new = 1e9, crc_boost = 1e9;
  uint32_t sink = 0;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = Clock::now();
    for (uint32_t i = 0; i < l.slots; ++i)
      sink ^= memory::crc32(file.data() + l.records_offset + i * l.record_bytes,
                            l.record_crc_offset);
    crc_new = std::min(crc_new, ms_since(t0));
    t0 = Clock::now();
    for (uint32_t i = 0; i < l.slots; ++i) {
      boost::crc_32_type c;
      c.process_bytes(file.data() + l.records_offset + i * l.record_bytes, l.record_crc_offset);
      sink ^= c.checksum();
    }
    crc_boost = std::min(crc_boost, ms_since(t0));
  }
  std::printf("  its records' checksums: %.1f ms with crc32, %.1f ms with boost's%s\n", crc_new,
              crc_boost, sink == 1 ? " " : "");
  std::filesystem::remove(path);
}

void bench_encode_rows(int dim) {
  memory::SrvqConfig c;
  c.dim = dim;
  auto codec = memory::SrvqCodec::train(c, test::structured_rows(1024, dim, 1));
  if (!codec.ok()) std::exit(1);
  const int n = 512;
  const std::vector<float> rows = test::structured_rows(n, dim, 2);
  std::vector<uint8_t> out(codec->row_bytes());
  double best = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = Clock::now();
    for (int r = 0; r < n; ++r) codec->encode(rows.data() + size_t(r) * dim, out.data());
    best = std::min(best, ms_since(t0));
  }
  std::printf("encode d %d: %.1f us a row (%zu bytes, %.3f bits an element)\n", dim,
              best * 1e3 / n, codec->row_bytes(), codec->bits_per_element());
}

// Training (256 tokens) and encoding an episode on cfg's tiered shapes, through the facade's
// ingesting half (what consolidation does without the store's lock).
void bench_episode(const ModelConfig& cfg, const std::string& path) {
  std::filesystem::remove(path);
  memory::MemoryOptions o;
  o.path = path;
  auto m = memory::EpisodicMemory::open(cfg, o, {});
  if (!m.ok()) {
    std::fprintf(stderr, "%s\n", m.error().message.c_str());
    std::exit(1);
  }
  const auto shapes = memory::tiered_shapes(cfg);
  size_t rows_per_token = 0;
  for (const auto& s : shapes) rows_per_token += 2 * size_t(s.num_key_value_heads);
  auto t0 = Clock::now();
  auto p = (*m)->prepare_ingest(test::token_block(shapes, 0, o.train_tokens));
  const double train_ms = ms_since(t0);
  if (!p.ok() || p->episodes.size() != o.train_tokens / o.episode_tokens) std::exit(1);
  // Training includes encoding the episodes it waited for; time encoding alone after it.
  const int episodes = 4;
  std::vector<KvBlock> blocks;
  for (int e = 0; e < episodes; ++e) {
    const int64_t p0 = int64_t(o.train_tokens) + int64_t(e) * o.episode_tokens;
    blocks.push_back(test::token_block(shapes, p0, o.episode_tokens));
  }
  t0 = Clock::now();
  for (const KvBlock& b : blocks) {
    auto q = (*m)->prepare_ingest(b);
    if (!q.ok() || q->episodes.size() != 1) std::exit(1);
  }
  const double per_episode = ms_since(t0) / episodes;
  std::printf("%zu tiered layers, %zu rows a token: train + encode of %u tokens %.0f ms; "
              "encode %.1f ms an episode of %u tokens (%.1f us a row, its key included); "
              "%u payload bytes an episode\n",
              shapes.size(), rows_per_token, o.train_tokens, train_ms, per_episode,
              o.episode_tokens, per_episode * 1e3 / double(rows_per_token * o.episode_tokens),
              (*m)->store().geometry().payload_bytes);
  std::filesystem::remove(path);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// A turn's recall with `episodes` stored: the codecs learned from 256 synthetic tokens, one
// episode copied with keys spread around its own (as cli/bench_memory.cpp's store: every
// episode admitted, so a turn ranks them all and decodes the best), queried with 32 and 128
// fresh tokens. Medians of 20 turns, phase by phase, on the coded first pass and on the exact
// path alternately (their hits compared).
void bench_recall(const ModelConfig& cfg, const std::string& path, uint32_t episodes,
                  int threads) {
  const auto fail = [](const Error& e) {
    std::fprintf(stderr, "%s\n", e.message.c_str());
    std::exit(1);
  };
  const auto shapes = memory::tiered_shapes(cfg);
  memory::MemoryOptions o;
  o.path = path + ".src";
  std::filesystem::remove(o.path);
  memory::Episode e;
  memory::StoreGeometry g;
  std::vector<uint8_t> codebooks;
  {
    auto src = memory::EpisodicMemory::open(cfg, o, {});
    if (!src.ok()) fail(src.error());
    auto p = (*src)->prepare_ingest(test::token_block(shapes, 0, o.train_tokens));
    if (!p.ok()) fail(p.error());
    if (auto c = (*src)->commit(std::move(p).value()); !c.ok()) fail(c.error());
    auto r = (*src)->store().read((*src)->store().list().front().id);
    if (!r.ok()) fail(r.error());
    e = std::move(r).value();
    g = (*src)->store().geometry();
    const std::span<const uint8_t> c = (*src)->store().codebooks();
    codebooks.assign(c.begin(), c.end());
  }
  std::filesystem::remove(o.path);
  std::filesystem::remove(path);
  g.capacity = episodes;
  {
    auto st = memory::EpisodeStore::open(path, g);
    if (!st.ok()) fail(st.error());
    if (auto r = (*st)->set_codebooks(codebooks); !r.ok()) fail(r.error());
    std::mt19937 rng(7);
    std::normal_distribution<float> noise(0.0f, 1.0f);
    const std::vector<float> key = e.key;
    // Each key part is unit: a spread of 0.3 of an element's rms, as the CLI bench's.
    const float spread = 0.3f / std::sqrt(float(o.association.dims));
    for (uint32_t i = 0; i < episodes; ++i) {
      for (size_t j = 0; j < key.size(); ++j) e.key[j] = key[j] + spread * noise(rng);
      if (auto r = (*st)->append(e, 0); !r.ok()) fail(r.error());
    }
  }
  o.path = path;
  o.capacity = episodes;
  o.min_association = -1.0f;
  o.recall_threads = threads;
  auto m = memory::EpisodicMemory::open(cfg, o, {});
  if (!m.ok()) fail(m.error());
  KvBlock rows;
  std::vector<memory::RecallHit> hits;
  struct Times {
    std::vector<double> total, qk, score, decode;
    size_t rescored = 0, fell_back = 0;
  };
  for (const int64_t q : {32, 128}) {
    const KvBlock query = test::token_block(shapes, 1 << 20, q, 9);
    Times fast, exact;
    size_t differing = 0;
    std::vector<memory::RecallHit> first;
    for (int rep = 0; rep < 40; ++rep) {
      // Fast and exact alternate (fast first on even pairs), so drift falls on both.
      const bool is_exact = (rep / 2 + rep) % 2 == 1;
      Times& t = is_exact ? exact : fast;
      (*m)->set_exact_recall(is_exact);
      const auto t0 = Clock::now();
      if (auto r = (*m)->recall(query, o.recall_tokens, &rows, &hits); !r.ok()) fail(r.error());
      t.total.push_back(ms_since(t0));
      const memory::RecallProfile& p = (*m)->last_recall_profile();
      t.qk.push_back(p.query_key_ms);
      t.score.push_back(p.score_ms);
      t.decode.push_back(p.decode_ms);
      t.rescored = std::max(t.rescored, p.rescored);
      t.fell_back += p.fell_back ? 1 : 0;
      if (rep % 2 == 0) {
        first = hits;
      } else {
        bool same = first.size() == hits.size();
        for (size_t i = 0; same && i < hits.size(); ++i)
          same = first[i].id == hits[i].id && first[i].association == hits[i].association;
        differing += same ? 0 : 1;
      }
      if (auto r = (*m)->strengthen(hits); !r.ok()) fail(r.error());
    }
    for (const Times* t : {&fast, &exact}) {
      std::printf("recall of %u episodes, %lld-token query, %s: %.2f ms (query_key %.2f, score "
                  "%.2f, decode %.2f; medians of 20), %zu tokens placed; at most %zu keys in "
                  "fp32, %zu fallbacks\n",
                  episodes, (long long)q, t == &fast ? "coded first pass" : "every key in fp32",
                  median(t->total), median(t->qk), median(t->score), median(t->decode),
                  rows.size(), t->rescored, t->fell_back);
    }
    std::printf("  ratio %.2f; %zu of 20 pairs recalled differently\n",
                median(fast.total) / median(exact.total), differing);
  }
  m->reset();
  std::filesystem::remove(path);
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path = "configs/e2b.json", dir = "/tmp";
  uint32_t episodes = 10000;
  bool recall_only = false;
  int threads = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--config" && i + 1 < argc) config_path = argv[++i];
    else if (a == "--episodes" && i + 1 < argc) episodes = uint32_t(std::atoi(argv[++i]));
    else if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    else if (a == "--recall-only") recall_only = true;
    else if (a == "--threads" && i + 1 < argc) threads = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr,
                   "usage: memory_bench [--config C] [--episodes N] [--dir D] [--recall-only] "
                   "[--threads N]\n");
      return 2;
    }
  }
  std::ifstream in(config_path);
  std::stringstream text;
  text << in.rdbuf();
  auto cfg = parse_config(text.str(), config_path);
  if (!cfg.ok()) {
    std::fprintf(stderr, "%s\n", cfg.error().message.c_str());
    return 1;
  }
  const std::string path = dir + "/memory_bench_" + std::to_string(getpid()) + ".mem";
  if (recall_only) {
    bench_recall(*cfg, path, episodes, threads);
    return 0;
  }
  bench_crc();
  memory::StoreGeometry g;
  g.model_fingerprint = 7;
  g.capacity = episodes;
  g.episode_tokens = 64;
  g.key_floats = 256;
  g.payload_bytes = 8192;
  g.codebook_bytes = 1 << 16;
  bench_open(path, g, "8 KiB payload");
  {
    // The model's own geometry: what EpisodicMemory::open makes for it.
    memory::MemoryOptions o;
    o.path = path;
    o.capacity = 1;
    std::filesystem::remove(path);
    auto m = memory::EpisodicMemory::open(*cfg, o, {});
    if (!m.ok()) return 1;
    g = (*m)->store().geometry();
    m->reset();
    std::filesystem::remove(path);
    g.capacity = episodes;
    bench_open(path, g, (config_path + " geometry").c_str());
  }
  bench_encode_rows(256);
  bench_encode_rows(512);
  bench_episode(*cfg, path);
  bench_recall(*cfg, path, episodes, threads);
  return 0;
}
