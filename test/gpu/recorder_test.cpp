// Buffers and the Recorder: transfers round-trip on both memory paths, dispatches get a barrier
// exactly where one reads or overwrites what another wrote (or read), and a reusable recording
// replays with fresh host inputs each time, as the bandwidth measurements replay theirs.
#include "gpu/recorder.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "base/check.h"
#include "gpu/buffer.h"
#include "gpu/context.h"
#include "gpu/gpu_bandwidth.h"
#include "gpu/ops/matvec.h"
#include "model/ops/matmul.h"
#include "test/gpu/gpu_test_env.h"

namespace infer::gpu {
namespace {

using GpuBuffer = GpuTest;
using GpuRecorder = GpuTest;

void round_trip(const VulkanContext& ctx, BufferKind kind) {
  std::vector<uint8_t> data(100003);
  std::iota(data.begin(), data.end(), uint8_t(7));
  auto b = Buffer::create(ctx, data.size() + 64, kind, "round trip");
  ASSERT_TRUE(b.ok()) << b.error().message;
  ASSERT_TRUE(upload(ctx, *b, 13, data.data(), data.size()).ok());
  std::vector<uint8_t> back(data.size(), 0);
  ASSERT_TRUE(download(ctx, *b, 13, back.data(), back.size()).ok());
  EXPECT_EQ(back, data);
}

TEST_F(GpuBuffer, UploadThenDownloadRoundTripsOnEveryMemoryPath) {
  round_trip(*ctx_, BufferKind::kDevice);
  round_trip(*ctx_, BufferKind::kHost);
  round_trip(*staging_ctx_, BufferKind::kDevice);
  auto staged = Buffer::create(*staging_ctx_, 256, BufferKind::kDevice, "staged");
  ASSERT_TRUE(staged.ok());
  EXPECT_EQ(staged->mapped(), nullptr);  // really staged
  EXPECT_EQ(ctx_->use_host_visible_device_memory(),
            Buffer::create(*ctx_, 256, BufferKind::kDevice, "uma")->mapped() != nullptr);
}

TEST_F(GpuBuffer, RejectsAnEmptyBuffer) {
  auto b = Buffer::create(*ctx_, 0, BufferKind::kDevice, "empty");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("\"empty\""), std::string::npos);
}

// A random f32 matrix W [n, n] (|w| <= 0.2) on the device, its matvec op, and a random x.
struct RandomMatvec {
  std::vector<float> wf, x;
  Matrix m;
  GpuMatrix w;
  std::unique_ptr<MatvecOp> op;
};

RandomMatvec random_matvec(const VulkanContext& ctx, int64_t n, uint32_t seed) {
  RandomMatvec r;
  r.wf.resize(size_t(n * n));
  r.x.resize(size_t(n));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-0.2f, 0.2f);
  for (float& v : r.wf) v = dist(rng);
  for (float& v : r.x) v = dist(rng);
  r.m = Matrix{WeightFormat::kF32, n, n, reinterpret_cast<const uint8_t*>(r.wf.data())};
  auto w = upload_matrix(ctx, r.m, "w");
  INFER_CHECK(w.ok(), "%s", w.error().message.c_str());
  r.w = std::move(*w);
  auto op = MatvecOp::create(ctx, WeightFormat::kF32);
  INFER_CHECK(op.ok(), "%s", op.error().message.c_str());
  r.op = std::move(*op);
  return r;
}

// y1 = W x and y2 = W x (independent: no barrier), z = W y1 (reads y1: one barrier), then x
// overwritten by a copy from z (z written before, x read before: two barriers), y2 = W x again
// (x written by the copy, y2 written before: two barriers). Results checked on the CPU.
void check_barriers(const VulkanContext& ctx) {
  const int64_t n = 96;
  const size_t un = size_t(n);
  RandomMatvec mv = random_matvec(ctx, n, 5);
  const Matrix& m = mv.m;
  const std::vector<float>& x = mv.x;
  const size_t bytes = size_t(n) * sizeof(float);
  auto xb = Buffer::create(ctx, bytes, BufferKind::kDevice, "x");
  auto y1 = Buffer::create(ctx, bytes, BufferKind::kDevice, "y1");
  auto y2 = Buffer::create(ctx, bytes, BufferKind::kDevice, "y2");
  auto z = Buffer::create(ctx, bytes, BufferKind::kDevice, "z");
  ASSERT_TRUE(xb.ok() && y1.ok() && y2.ok() && z.ok());
  ASSERT_TRUE(upload(ctx, *xb, 0, x.data(), bytes).ok());

  auto rec = Recorder::create(ctx);
  ASSERT_TRUE(rec.ok()) << rec.error().message;
  Recorder& r = **rec;
  ASSERT_TRUE(r.begin().ok());
  ASSERT_TRUE(mv.op->record(r, mv.w, {&*xb}, {&*y1}, 1).ok());
  ASSERT_TRUE(mv.op->record(r, mv.w, {&*xb}, {&*y2}, 1).ok());
  EXPECT_EQ(r.barrier_count(), 0);
  ASSERT_TRUE(mv.op->record(r, mv.w, {&*y1}, {&*z}, 1).ok());
  EXPECT_EQ(r.barrier_count(), 1);
  r.copy(*z, 0, *xb, 0, bytes);
  EXPECT_EQ(r.barrier_count(), 3);
  ASSERT_TRUE(mv.op->record(r, mv.w, {&*xb}, {&*y2}, 1).ok());
  EXPECT_EQ(r.barrier_count(), 5);
  EXPECT_EQ(r.dispatch_count(), 4);
  // One pipeline barrier per dependent step, holding every buffer barrier the step needs.
  EXPECT_EQ(r.barrier_command_count(), 3);
  EXPECT_GE(r.max_bindings(), 8u);
  ASSERT_TRUE(r.submit_and_wait().ok());

  std::vector<float> want_z(un), want_y2(un), got_z(un), got_y2(un), want_y1(un);
  matmul_reference(m, x.data(), 1, want_y1.data());
  matmul_reference(m, want_y1.data(), 1, want_z.data());
  matmul_reference(m, want_z.data(), 1, want_y2.data());
  ASSERT_TRUE(download(ctx, *z, 0, got_z.data(), bytes).ok());
  ASSERT_TRUE(download(ctx, *y2, 0, got_y2.data(), bytes).ok());
  for (int64_t i = 0; i < n; ++i) {
    // |w| <= 0.2, 96 terms: values stay O(1); f32 order differences are ~1e-6.
    EXPECT_NEAR(got_z[size_t(i)], want_z[size_t(i)], 1e-5f) << "z[" << i << "]";
    EXPECT_NEAR(got_y2[size_t(i)], want_y2[size_t(i)], 1e-5f) << "y2[" << i << "]";
  }

  // A second recording on the same Recorder starts from a clean slate.
  ASSERT_TRUE(r.begin().ok());
  ASSERT_TRUE(mv.op->record(r, mv.w, {&*xb}, {&*y1}, 1).ok());
  EXPECT_EQ(r.barrier_count(), 0);
  ASSERT_TRUE(r.submit_and_wait().ok());
}

TEST_F(GpuRecorder, PutsBarriersOnlyWhereDataDepends) {
  check_barriers(*ctx_);
  check_barriers(*staging_ctx_);
}

// A buffer written by a shader, read by a copy, then read by a shader again: the barrier before
// the copy must also cover the later shader read (the recorder forgets the write after it), so
// the second read needs none of its own; synchronization validation (on in the gpu suite) would
// flag the hazard, and the result is checked on the CPU.
TEST_F(GpuRecorder, OneBarrierCoversACopyAndALaterShaderRead) {
  const int64_t n = 64;
  const size_t un = size_t(n);
  RandomMatvec mv = random_matvec(*ctx_, n, 9);
  const Matrix& m = mv.m;
  const std::vector<float>& x = mv.x;
  const size_t bytes = un * sizeof(float);
  auto xb = Buffer::create(*ctx_, bytes, BufferKind::kDevice, "x");
  auto y = Buffer::create(*ctx_, bytes, BufferKind::kDevice, "y");
  auto copy = Buffer::create(*ctx_, bytes, BufferKind::kDevice, "copy");
  auto z = Buffer::create(*ctx_, bytes, BufferKind::kDevice, "z");
  ASSERT_TRUE(xb.ok() && y.ok() && copy.ok() && z.ok());
  ASSERT_TRUE(upload(*ctx_, *xb, 0, x.data(), bytes).ok());
  auto rec = Recorder::create(*ctx_);
  ASSERT_TRUE(rec.ok()) << rec.error().message;
  Recorder& r = **rec;
  ASSERT_TRUE(r.begin().ok());
  ASSERT_TRUE(mv.op->record(r, mv.w, {&*xb}, {&*y}, 1).ok());
  r.copy(*y, 0, *copy, 0, bytes);
  EXPECT_EQ(r.barrier_command_count(), 1);
  ASSERT_TRUE(mv.op->record(r, mv.w, {&*y}, {&*z}, 1).ok());
  EXPECT_EQ(r.barrier_command_count(), 1);
  ASSERT_TRUE(r.submit_and_wait().ok());
  std::vector<float> want_y(un), want_z(un), got_copy(un), got_z(un);
  matmul_reference(m, x.data(), 1, want_y.data());
  matmul_reference(m, want_y.data(), 1, want_z.data());
  ASSERT_TRUE(download(*ctx_, *copy, 0, got_copy.data(), bytes).ok());
  ASSERT_TRUE(download(*ctx_, *z, 0, got_z.data(), bytes).ok());
  for (size_t i = 0; i < un; ++i) {
    EXPECT_NEAR(got_copy[i], want_y[i], 1e-5f) << "copy[" << i << "]";
    EXPECT_NEAR(got_z[i], want_z[i], 1e-5f) << "z[" << i << "]";
  }
}

// More dispatches than one descriptor pool holds (256 sets): the Recorder adds pools.
TEST_F(GpuRecorder, RecordsMoreDispatchesThanOnePoolHolds) {
  const int64_t n = 32;
  const size_t un = size_t(n);
  std::vector<float> wf(un * un, 0.0f), x(un, 1.0f), y(un, 0.0f);
  for (int64_t i = 0; i < n; ++i) wf[size_t(i * n + i)] = 1.0f;  // identity: y = x every time
  const Matrix m{WeightFormat::kF32, n, n, reinterpret_cast<const uint8_t*>(wf.data())};
  auto w = upload_matrix(*ctx_, m, "identity");
  auto op = MatvecOp::create(*ctx_, WeightFormat::kF32);
  auto a = Buffer::create(*ctx_, size_t(n) * 4, BufferKind::kDevice, "a");
  auto b = Buffer::create(*ctx_, size_t(n) * 4, BufferKind::kDevice, "b");
  auto rec = Recorder::create(*ctx_);
  ASSERT_TRUE(w.ok() && op.ok() && a.ok() && b.ok() && rec.ok());
  ASSERT_TRUE(upload(*ctx_, *a, 0, x.data(), size_t(n) * 4).ok());
  ASSERT_TRUE((*rec)->begin().ok());
  for (int i = 0; i < 600; ++i) {  // ping-pong a -> b -> a: every dispatch depends on the last
    const bool even = i % 2 == 0;
    ASSERT_TRUE((*op)->record(**rec, *w, {even ? &*a : &*b}, {even ? &*b : &*a}, 1).ok());
  }
  ASSERT_TRUE((*rec)->submit_and_wait().ok());
  ASSERT_TRUE(download(*ctx_, *a, 0, y.data(), size_t(n) * 4).ok());
  EXPECT_EQ(y, x);
}

// Decode's pattern: one recording, replayed with the host rewriting its input between submits.
// y = 2x (W = 2·identity) then z = 2y (a barrier on y); another Recorder runs between replays.
void check_replay(const VulkanContext& ctx) {
  const int64_t n = 64;
  const size_t un = size_t(n), bytes = un * sizeof(float);
  std::vector<float> wf(un * un, 0.0f);
  for (int64_t i = 0; i < n; ++i) wf[size_t(i * n + i)] = 2.0f;
  const Matrix m{WeightFormat::kF32, n, n, reinterpret_cast<const uint8_t*>(wf.data())};
  auto w = upload_matrix(ctx, m, "2I");
  auto op = MatvecOp::create(ctx, WeightFormat::kF32);
  auto x = Buffer::create(ctx, bytes, BufferKind::kHost, "x (host-written)");
  auto y = Buffer::create(ctx, bytes, BufferKind::kDevice, "y");
  auto z = Buffer::create(ctx, bytes, BufferKind::kHost, "z (host-read)");
  auto other_out = Buffer::create(ctx, bytes, BufferKind::kDevice, "other out");
  auto rec = Recorder::create(ctx);
  auto other = Recorder::create(ctx);
  ASSERT_TRUE(w.ok() && op.ok() && x.ok() && y.ok() && z.ok() && other_out.ok() && rec.ok() &&
              other.ok());
  Recorder& r = **rec;
  ASSERT_TRUE(r.begin(true).ok());
  EXPECT_TRUE(r.reusable());
  ASSERT_TRUE((*op)->record(r, *w, {&*x}, {&*y}, 1).ok());
  ASSERT_TRUE((*op)->record(r, *w, {&*y}, {&*z}, 1).ok());
  ASSERT_TRUE(r.end().ok());
  EXPECT_EQ(r.dispatch_count(), 2);
  EXPECT_EQ(r.barrier_count(), 1);

  float* xs = static_cast<float*>(x->mapped());
  const float* zs = static_cast<const float*>(z->mapped());
  ASSERT_NE(xs, nullptr);
  ASSERT_NE(zs, nullptr);
  for (int replay = 0; replay < 5; ++replay) {
    for (size_t i = 0; i < un; ++i) xs[i] = float(replay * 1000 + int(i));
    ASSERT_TRUE(r.submit_and_wait().ok()) << "replay " << replay;
    for (size_t i = 0; i < un; ++i) {
      ASSERT_EQ(zs[i], 4.0f * float(replay * 1000 + int(i))) << "replay " << replay << " z[" << i
                                                             << "]";
    }
    EXPECT_GT(r.last_timing().wait_s, 0.0);
    EXPECT_GE(r.last_timing().submit_s, 0.0);
    // Unrelated one-time work in between does not disturb the recording.
    ASSERT_TRUE((*other)->begin().ok());
    ASSERT_TRUE((*op)->record(**other, *w, {&*y}, {&*other_out}, 1).ok());
    ASSERT_TRUE((*other)->submit_and_wait().ok());
  }
  // Split submit and wait, as decode times them.
  ASSERT_TRUE(r.submit().ok());
  ASSERT_TRUE(r.wait().ok());
  EXPECT_EQ(zs[1], 4.0f * 4001.0f);
}

TEST_F(GpuRecorder, ReplaysAReusableRecordingWithFreshHostInputs) {
  check_replay(*ctx_);
  check_replay(*staging_ctx_);
}

// gpu/gpu_bandwidth.cpp replays one recording per timed pass: the shader read and the copy both
// give a positive figure per pass (small buffers: lavapipe reads host memory slowly).
using GpuBandwidth = GpuTest;

TEST_F(GpuBandwidth, ReadAndCopyReportPositiveFiguresPerPass) {
  const size_t bytes = size_t(32) << 20;
  auto read = measure_device_read_bandwidth(*ctx_, bytes, /*passes=*/3, /*sweeps=*/2);
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read->buffer_bytes, bytes);
  EXPECT_EQ(read->sweeps_per_pass, 2);
  ASSERT_EQ(read->passes_gb_per_s.size(), 3u);
  for (double gb : read->passes_gb_per_s) EXPECT_GT(gb, 0.0);
  EXPECT_GE(read->best_gb_per_s, read->median_gb_per_s);
  EXPECT_GT(read->median_gb_per_s, 0.0);
  EXPECT_FALSE(measure_device_read_bandwidth(*ctx_, 0).ok());

  auto copy = measure_copy_bandwidth(*ctx_, bytes, /*passes=*/2);
  ASSERT_TRUE(copy.ok()) << copy.error().message;
  EXPECT_EQ(copy->passes_gb_per_s.size(), 2u);
  EXPECT_GT(copy->best_gb_per_s, 0.0);
}

}  // namespace
}  // namespace infer::gpu
