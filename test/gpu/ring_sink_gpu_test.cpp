// The GPU ring's eviction sink and recall against the CPU ring's: the same evicted tokens and
// rows, read from staging in one transfer, and the same logits with recalled rows.
#include "test/gpu/ring_gpu_fixture.h"

namespace infer::gpu {
namespace {

using namespace test_ring;

struct Collector final : EvictionSink {
  void on_evict(std::span<const EvictedToken> tokens, const KvRows& rows) override {
    block.append(tokens, rows);
  }
  KvBlock block;
};

// FIFO: every evicted position handed on once, in order, with the ids and the rows the CPU ring
// hands on for the same stream (decode steps, then prefill chunks of up to 8 evictions).
TEST_F(RingGpu, FifoHandsOnTheCpuRingsTokensAndRows) {
  auto model = load("e2b-mini");
  ASSERT_NE(model, nullptr);
  const int64_t V = golden_.vocab, A = 3, W = 20, n = 200;
  const std::vector<int32_t> ids = pseudo_ids(n, V, 7);
  const RingConfig c = ring(A, W, 4);
  CpuForward cpu(*model, pool_, c, 8);
  auto f = gpu(*model, c, 8);
  ASSERT_NE(f, nullptr);
  Collector cpu_sink, gpu_sink;
  cpu.set_eviction_sink(&cpu_sink);
  f->set_eviction_sink(&gpu_sink);
  std::vector<float> logits(static_cast<size_t>(V));
  for (Forward* fwd : {static_cast<Forward*>(&cpu), static_cast<Forward*>(f.get())}) {
    for (int64_t p = 0; p < 60; ++p) ASSERT_TRUE(fwd->decode(ids[size_t(p)], logits.data()).ok());
    ASSERT_TRUE(fwd->prefill(std::span(ids).subspan(60), logits.data()).ok());
  }
  std::vector<int64_t> want;
  for (int64_t p = A; p < n - W; ++p) want.push_back(p);
  EXPECT_EQ(gpu_sink.block.pos, want);
  EXPECT_EQ(gpu_sink.block.ids, cpu_sink.block.ids);
  ASSERT_FALSE(gpu_sink.block.layers.empty());
  ASSERT_EQ(gpu_sink.block.layers, cpu_sink.block.layers);
  for (size_t i = 0; i < gpu_sink.block.layers.size(); ++i) {
    // K before RoPE, V after v_norm: the same rows up to f32 summation order.
    EXPECT_LE(max_diff(gpu_sink.block.k[i], cpu_sink.block.k[i]), 1e-4f) << "layer " << i;
    EXPECT_LE(max_diff(gpu_sink.block.v[i], cpu_sink.block.v[i]), 1e-4f) << "layer " << i;
  }
  KvBlock b;
  EXPECT_FALSE(f->read_kv(A, 1, &b).ok());  // evicted: no longer readable
  ASSERT_TRUE(f->read_kv(n - 5, 5, &b).ok());
  EXPECT_EQ(b.size(), 5u);
}

// The sink's rows come from the host staging the chunk's own command buffer fills, with no
// download of their own (kv_row_downloads stays 0: no wait per evicted token), and they are the
// CPU ring's rows: decode steps (one eviction each), then prefill chunks evicting max_chunk
// tokens each, then decode again, under FIFO and mass eviction. read_kv downloads, in one transfer.
TEST_F(RingGpu, SinkRowsComeFromStagingWithoutDownloads) {
  auto model = load("e2b-mini");
  ASSERT_NE(model, nullptr);
  for (const EvictPolicy policy : {EvictPolicy::kFifo, EvictPolicy::kMass}) {
    SCOPED_TRACE(policy == EvictPolicy::kMass ? "mass" : "fifo");
    const int64_t V = golden_.vocab, A = 3, W = 24, n = 150;
    const std::vector<int32_t> ids = pseudo_ids(n, V, 21);
    const RingConfig c = ring(A, W, 4, policy);
    CpuForward cpu(*model, pool_, c, 16);
    auto f = gpu(*model, c, 16);
    ASSERT_NE(f, nullptr);
    Collector cpu_sink, gpu_sink;
    cpu.set_eviction_sink(&cpu_sink);
    f->set_eviction_sink(&gpu_sink);
    std::vector<float> logits(static_cast<size_t>(V));
    for (Forward* fwd : {static_cast<Forward*>(&cpu), static_cast<Forward*>(f.get())}) {
      for (int64_t p = 0; p < 40; ++p) {
        ASSERT_TRUE(fwd->decode(ids[size_t(p)], logits.data()).ok());
      }
      ASSERT_TRUE(fwd->prefill(std::span(ids).subspan(40, 80), logits.data()).ok());
      for (int64_t p = 120; p < n; ++p) {
        ASSERT_TRUE(fwd->decode(ids[size_t(p)], logits.data()).ok());
      }
    }
    EXPECT_EQ(f->kv_row_downloads(), 0);
    ASSERT_EQ(gpu_sink.block.size(), size_t(n - A - W));
    EXPECT_EQ(gpu_sink.block.pos, cpu_sink.block.pos);
    EXPECT_EQ(gpu_sink.block.ids, cpu_sink.block.ids);
    ASSERT_EQ(gpu_sink.block.layers, cpu_sink.block.layers);
    ASSERT_FALSE(gpu_sink.block.layers.empty());
    for (size_t i = 0; i < gpu_sink.block.layers.size(); ++i) {
      EXPECT_LE(max_diff(gpu_sink.block.k[i], cpu_sink.block.k[i]), 1e-4f) << "layer " << i;
      EXPECT_LE(max_diff(gpu_sink.block.v[i], cpu_sink.block.v[i]), 1e-4f) << "layer " << i;
    }
    // The sink taken away: no rows handed on, the staging copies idle (E = 0).
    f->set_eviction_sink(nullptr);
    ASSERT_TRUE(f->decode(ids[0], logits.data()).ok());
    EXPECT_EQ(gpu_sink.block.size(), size_t(n - A - W));
    // read_kv gathers every tiered layer's rows in one transfer (one wait), the window's slots
    // wrapping around included (FIFO keeps the last W tokens; mass eviction only the newest
    // surely), and they are the CPU ring's rows.
    const int64_t span = policy == EvictPolicy::kFifo ? W - 1 : 2;
    KvBlock g, c2;
    ASSERT_TRUE(f->read_kv(n - span, span, &g).ok());
    EXPECT_EQ(f->kv_row_downloads(), 1);
    ASSERT_TRUE(cpu.read_kv(n - span, span, &c2).ok());
    EXPECT_EQ(g.pos, c2.pos);
    EXPECT_EQ(g.ids, c2.ids);
    ASSERT_EQ(g.layers, c2.layers);
    for (size_t i = 0; i < g.layers.size(); ++i) {
      EXPECT_LE(max_diff(g.k[i], c2.k[i]), 1e-4f) << "layer " << i;
      EXPECT_LE(max_diff(g.v[i], c2.v[i]), 1e-4f) << "layer " << i;
    }
  }
}

// Rows placed in the recall tier (read from the CPU ring after a real text X) give the GPU the
// logits they give the CPU ring on a text Y, and differ from no recall.
TEST_F(RingGpu, RecalledRowsGiveTheCpuRingsLogits) {
  auto model = load("e2b-mini");
  ASSERT_NE(model, nullptr);
  const int64_t V = golden_.vocab, nx = 24, ny = 40;
  const std::vector<int32_t> x = pseudo_ids(nx, V, 3), y = pseudo_ids(ny, V, 9);
  const RingConfig c = ring(2, 32, nx);
  CpuForward cpu(*model, pool_, c, 32);
  auto f = gpu(*model, c, 32);
  ASSERT_NE(f, nullptr);
  std::vector<float> scratch(static_cast<size_t>(V));
  ASSERT_TRUE(cpu.prefill(x, scratch.data()).ok());
  KvBlock rx;
  ASSERT_TRUE(cpu.read_kv(2, nx - 2, &rx).ok());
  cpu.reset();
  auto y_logits = [&](Forward& fwd, KvRingAccess& access, const KvBlock* recalled) {
    fwd.reset();
    if (recalled != nullptr) {
      EXPECT_TRUE(access.set_recall(*recalled).ok());
    }
    std::vector<int32_t> tokens;
    return stream(fwd, y, 8, V, &tokens);
  };
  const std::vector<float> want = y_logits(cpu, cpu, &rx);
  const std::vector<float> got = y_logits(*f, *f, &rx);
  EXPECT_LE(max_diff(got, want), kTol);
  KvBlock empty = rx;
  empty.pos.clear();
  empty.ids.clear();
  for (auto& k : empty.k) k.clear();
  for (auto& v : empty.v) v.clear();
  const std::vector<float> none = y_logits(*f, *f, &empty);
  EXPECT_GT(max_diff(none, want), 1e-2f);  // the recalled rows are attended
  KvBlock bad = rx;
  bad.k[0].pop_back();
  EXPECT_FALSE(f->set_recall(bad).ok());
}

}  // namespace
}  // namespace infer::gpu
