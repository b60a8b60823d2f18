// The forward with decode's residual steps in the next product's prologue (opt-in:
// INFER_NORM_IN=p the PLE projection alone, 1 plain products, 2 gate-up too; and the PLE gate's
// gelu-mul epilogue, INFER_PLE_EPILOGUE=1) against the same forward with the separate
// dispatches (INFER_NORM_IN=0, the default), on every fixture architecture: the
// dispatches it saves per decode token, and the same greedy tokens with logits within the
// fixtures' bound through both decode paths. forward_test.cpp checks the default against the CPU
// and the golden files (Q8_0 and Q4_0 weights too); this one pins what the fusion changes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gpu/gpu_forward.h"
#include "gpu/ops/matvec_norm_in.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "test/gpu/forward_fixture_test.h"
#include "test/gpu/gpu_test_env.h"
#include "test/model/golden_fixture.h"
#include "test/scoped_env.h"
#include "test/test_paths.h"

namespace infer::gpu {
namespace {

using Case = test::FixtureCase;

class ForwardNormInGpu : public GpuFixtureTest {
 protected:
  // A forward made while `var` = value ("INFER_NORM_IN", "0": no fusion).
  std::unique_ptr<GpuForward> make(const Model& model, const char* var, const char* value) {
    const test::ScopedEnv env(var, value);
    auto f = GpuForward::create(*ctx_, model, pool_, test::kGoldenMaxPositions, 8);
    EXPECT_TRUE(f.ok()) << f.error().message;
    return f.ok() ? std::move(f).value() : nullptr;
  }

  // Greedy through decode (logits) and decode_greedy (ids): the same tokens, logits within the
  // fixtures' bound (both sum in f32; only the fused steps' reduction order differs).
  void expect_same_decode(GpuForward& on, GpuForward& off) {
    const int64_t V = golden_.vocab;
    std::vector<float> a(static_cast<size_t>(V)), b(a.size());
    ASSERT_TRUE(on.prefill(golden_.prompt_ids, a.data()).ok());
    ASSERT_TRUE(off.prefill(golden_.prompt_ids, b.data()).ok());
    float worst = 0;
    for (int k = 0; k < 8; ++k) {
      const int32_t id = test::argmax(a.data(), V);
      ASSERT_EQ(id, test::argmax(b.data(), V)) << "step " << k;
      ASSERT_TRUE(on.decode(id, a.data()).ok());
      ASSERT_TRUE(off.decode(id, b.data()).ok());
      worst = std::max(worst, test::max_abs_diff(a.data(), b.data(), V));
    }
    EXPECT_LE(worst, test::kGoldenTol);
    for (int k = 0; k < 8; ++k) {
      const int32_t id = test::argmax(a.data(), V);
      auto x = on.decode_greedy(id);
      auto y = off.decode_greedy(id);
      ASSERT_TRUE(x.ok() && y.ok());
      ASSERT_EQ(*x, *y) << "greedy step " << k;
      ASSERT_TRUE(on.decode(*x, a.data()).ok());
      ASSERT_TRUE(off.decode(*y, b.data()).ok());
    }
  }

  // Layers whose slice of the PLE inputs the device can bind at its offset: those whose PLE
  // gate can take gelu_mul in its epilogue (INFER_PLE_EPILOGUE=1).
  int epilogue_layers(const TextConfig& tc) const {
    const uint64_t align = std::max<uint64_t>(1, ctx_->info().min_storage_buffer_offset_alignment);
    int n = 0;
    for (int i = 0; tc.hidden_size_per_layer_input > 0 && i < tc.num_hidden_layers; ++i) {
      n += (uint64_t(i) * uint64_t(tc.hidden_size_per_layer_input) * 4) % align == 0;
    }
    return n;
  }
};

TEST_P(ForwardNormInGpu, DecodeSavesTheStepDispatchesAndKeepsTheTokens) {
  auto m = Model::load(dir_, LoadOptions{Quant::kAsStored, EmbedScale::kF32}, pool_);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const Model& model = **m;
  const TextConfig& tc = model.config().text;
  const bool ple = tc.hidden_size_per_layer_input > 0;
  for (const char* mode : {"p", "1", "2"}) {
    SCOPED_TRACE(std::string("INFER_NORM_IN=") + mode);
    const bool gate_up = mode[0] == '2', ple_only = mode[0] == 'p';
    if (ple_only && !ple) continue;  // without PLE, mode p is mode 0
    std::unique_ptr<GpuForward> on = make(model, "INFER_NORM_IN", mode),
                                off = make(model, "INFER_NORM_IN", "0");
    ASSERT_TRUE(on != nullptr && off != nullptr);

    // Saved per layer: the attention block's add_norm (into gate-up's prologue, mode 2) and
    // the layer's last step (into the next qkv's, the last layer's into the head's where it
    // takes it: not a vocabulary of 262144, gpu/ops/matvec_norm_in.h); with PLE also the MLP's
    // add_norm (into the PLE gate's) and gelu_mul (into the projection's). Once: the first
    // layer's rms_norm. Mode p: only the PLE projection's gelu_mul.
    const Matrix& head = model.weights().lm_head;
    auto head_op = MatvecNormInOp::create(*ctx_, head.format, false, uint32_t(tc.hidden_size));
    ASSERT_TRUE(head_op.ok() && *head_op != nullptr);
    const int head_fused = (*head_op)->slots_for(head.rows) > 0 ? 1 : 0;
    const int L = tc.num_hidden_layers;
    const int saved = ple_only ? (ple ? L : 0)
                               : L * (ple ? 3 : 1) + (gate_up ? L : 0) + 1 - (1 - head_fused);
    const RecordingCounts c_on = on->decode_counts(), c_off = off->decode_counts();
    std::printf("[%s] decode dispatches: %d fused, %d apart (%d barriers, %d apart)\n",
                GetParam().name, c_on.dispatches, c_off.dispatches, c_on.barrier_commands,
                c_off.barrier_commands);
    EXPECT_EQ(c_off.dispatches - c_on.dispatches, saved);
    EXPECT_LE(c_on.barrier_commands, c_on.dispatches);
    expect_same_decode(*on, *off);
  }
}

// The PLE gate's gelu-mul epilogue (opt-in): one gelu_mul dispatch fewer a PLE layer, the same
// tokens.
TEST_P(ForwardNormInGpu, PleEpilogueSavesTheGeluMulDispatchesAndKeepsTheTokens) {
  auto m = Model::load(dir_, LoadOptions{Quant::kAsStored, EmbedScale::kF32}, pool_);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const Model& model = **m;
  std::unique_ptr<GpuForward> on = make(model, "INFER_PLE_EPILOGUE", "1"),
                              off = make(model, "INFER_PLE_EPILOGUE", "0");
  ASSERT_TRUE(on != nullptr && off != nullptr);
  const int saved = epilogue_layers(model.config().text);
  std::printf("[%s] decode dispatches: %d with the epilogue, %d without\n", GetParam().name,
              on->decode_counts().dispatches, off->decode_counts().dispatches);
  EXPECT_EQ(off->decode_counts().dispatches - on->decode_counts().dispatches, saved);
  if (model.config().text.hidden_size_per_layer_input == 0) return;  // nothing fused: the same
  EXPECT_GT(saved, 0);
  expect_same_decode(*on, *off);
}

INSTANTIATE_TEST_SUITE_P(ForwardFixtures, ForwardNormInGpu,
                         ::testing::ValuesIn(test::kArchitectureCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace infer::gpu
