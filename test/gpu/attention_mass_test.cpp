// GPU attention mass (--evict mass) vs the CPU reference model/ops/attention_mass: tiered ring
// layers with GQA, ragged head dims and ring sizes, key slots in a shuffled order, decode and
// prefill chunks, and the accumulate flag (the chunk's first layer overwrites, later ones add).
#include "gpu/ops/attention_mass.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "model/ops/attention_mass.h"
#include "shaders/attention.h"
#include "shaders/step.h"
#include "test/gpu/attention_test_util.h"

namespace infer::gpu {
namespace {

struct MassCase {
  uint32_t n_q, n_kv, d, slots, n_keys, T;
};

// Rotate-half RoPE of one head row at position pos (as qkv_prep and kv_key rotate).
void rotate(float* x, uint32_t d, uint32_t pos, const std::vector<float>& inv_freq) {
  const uint32_t h = d / 2;
  for (uint32_t j = 0; j < h; ++j) {
    const double a = double(float(pos) * inv_freq[j]);
    const float c = float(std::cos(a)), s = float(std::sin(a));
    const float x0 = x[j], x1 = x[j + h];
    x[j] = x0 * c - x1 * s;
    x[j + h] = x1 * c + x0 * s;
  }
}

void check_mass(const VulkanContext& ctx, const MassCase& c, uint32_t seed) {
  SCOPED_TRACE("n_q " + std::to_string(c.n_q) + " n_kv " + std::to_string(c.n_kv) + " d " +
               std::to_string(c.d) + " slots " + std::to_string(c.slots) + " n_keys " +
               std::to_string(c.n_keys) + " T " + std::to_string(c.T));
  const uint32_t row = c.n_kv * c.d;
  // K rows unrotated, as the ring stores them: slots, then the chunk's staging rows.
  const std::vector<float> k = random_vector(size_t(c.slots + c.T) * row, seed, -1.0f, 1.0f);
  const float qs = 3.0f / std::sqrt(float(c.d));  // scores with a spread of a few units
  const std::vector<float> q = random_vector(size_t(c.T) * c.n_q * c.d, seed + 1, -qs, qs);
  std::vector<float> inv_freq(c.d / 2);
  for (uint32_t j = 0; j < c.d / 2; ++j) {
    inv_freq[j] = j < c.d / 3 ? float(std::pow(10000.0, -2.0 * j / c.d)) : 0.0f;  // zero tail
  }
  std::vector<int32_t> slots(c.slots);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937(seed));
  slots.resize(c.n_keys);  // attended: some slots, in an order other than theirs

  // CPU: the rotated keys gathered in cache order (as CpuForward's ring view), the chunk after.
  std::vector<float> cache(size_t(std::max(1u, c.n_keys)) * row), chunk(size_t(c.T) * row);
  for (uint32_t i = 0; i < c.n_keys; ++i) {
    std::copy_n(&k[size_t(slots[i]) * row], row, &cache[size_t(i) * row]);
    for (uint32_t h = 0; h < c.n_kv; ++h) rotate(&cache[size_t(i) * row + h * c.d], c.d, i, inv_freq);
  }
  for (uint32_t t = 0; t < c.T; ++t) {
    std::copy_n(&k[size_t(c.slots + t) * row], row, &chunk[size_t(t) * row]);
    for (uint32_t h = 0; h < c.n_kv; ++h) {
      rotate(&chunk[size_t(t) * row + h * c.d], c.d, c.n_keys + t, inv_freq);
    }
  }
  AttentionShape shape;
  shape.T = c.T;
  shape.pos0 = c.n_keys;
  shape.n_q = c.n_q;
  shape.n_kv = c.n_kv;
  shape.d = c.d;
  const KvView view{cache.data(), nullptr, std::max<int64_t>(1, c.n_keys), 0, chunk.data(), nullptr};
  std::vector<float> want(c.n_keys, 0.0f), scores(size_t(c.n_keys + c.T));
  attention_key_mass(q.data(), shape, view, c.n_keys, scores.data(), want.data());

  auto ops = AttentionMassOps::create(ctx, {kMaxChunk, c.n_q, 512, c.slots});
  ASSERT_TRUE(ops.ok()) << ops.error().message;
  const uint32_t words = INFER_STEP_RING_WORDS(kMaxChunk, c.slots);
  auto step = Buffer::create(ctx, words * sizeof(uint32_t), BufferKind::kHost, "step");
  ASSERT_TRUE(step.ok());
  std::vector<uint32_t> w(words, 0u);
  w[INFER_STEP_T] = c.T;
  w[INFER_STEP_N_KEYS] = c.n_keys;
  for (uint32_t i = 0; i < c.n_keys; ++i) w[INFER_STEP_KEYS(c.T) + i] = uint32_t(slots[i]);
  std::memcpy(step->mapped(), w.data(), words * sizeof(uint32_t));
  const Buffer kb = device_buffer(ctx, k, "k_cache"), qb = device_buffer(ctx, q, "q"),
               fb = device_buffer(ctx, inv_freq, "inv_freq");
  AttentionDims dims;
  dims.T = c.T;
  dims.n_q = c.n_q;
  dims.n_kv = c.n_kv;
  dims.d = c.d;
  dims.slots = c.slots;
  dims.mode = INFER_KV_TIERED;
  // Two layers' worth (overwrite, then add): twice the mass; then one overwrite: once.
  for (int layers : {2, 1}) {
    auto rec = Recorder::create(ctx);
    ASSERT_TRUE(rec.ok());
    ASSERT_TRUE((*rec)->begin().ok());
    for (int l = 0; l < layers; ++l) {
      auto r = (*ops)->record(**rec, {&*step}, dims, {&qb}, {&kb}, {&fb}, l > 0);
      ASSERT_TRUE(r.ok()) << r.error().message;
    }
    (*ops)->record_readback(**rec);
    ASSERT_TRUE((*rec)->submit_and_wait().ok());
    const float* got = (*ops)->host();
    for (uint32_t i = 0; i < c.n_keys; ++i) {
      const float x = want[i] * float(layers);
      EXPECT_NEAR(got[i], x, 1e-5f + 2e-4f * std::abs(x)) << "key " << i << ", " << layers;
    }
  }
}

// Decode (T = 1) and prefill chunks; d 16 .. 512, odd head groups, a ring not yet full, and
// the first chunk of a stream (no cached keys: nothing to write).
TEST_F(AttentionTest, MassMatchesCpuReference) {
  const MassCase cases[] = {
      {8, 1, 256, 40, 37, 1}, {4, 2, 16, 13, 11, 5},  {6, 3, 20, 70, 70, 3},
      {2, 1, 512, 9, 9, 2},   {8, 2, 64, 33, 20, 17}, {4, 4, 32, 8, 0, 4},
  };
  uint32_t seed = 11;
  for (const MassCase& c : cases) check_mass(*ctx_, c, seed++);
}

}  // namespace
}  // namespace infer::gpu
