// The forward with decode's residual steps in the next product's prologue (opt-in:
// INFER_NORM_IN=p the PLE projection alone, 1 plain products, 2 gate-up too; and the PLE gate's
// gelu-mul epilogue, INFER_PLE_EPILOGUE=1; and long rows on their own product shape,
// INFER_MV_LONG_SUBGROUPS; and the step words in host memory, INFER_STEP_HOST=1) against the
// same forward with the separate dispatches (INFER_NORM_IN=0, the default), on every fixture
// architecture: the
// dispatches it saves per decode token, and the same greedy tokens with logits within the
// fixtures' bound through both decode paths. forward_test.cpp checks the default against the CPU
// and the golden files (Q8_0 and Q4_0 weights too); this one pins what the fusion changes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
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
    return make_forward(model);
  }

  // Greedy from the prompt through decode (8 steps, logits) then decode_greedy (8 steps, each
  // followed by a decode of its id): the ids fed and returned, and decode's logits.
  struct Greedy {
    std::vector<int32_t> ids;
    std::vector<std::vector<float>> logits;
  };

  // Runs `f` greedily into *got. With `want`, the separate dispatches' run: the same ids (so the
  // fused forward is fed what the separate one was, as if side by side) and logits within the
  // fixtures' bound (both sum in f32; only the fused steps' reduction order differs).
  void greedy(GpuForward& f, const Greedy* want, Greedy* got) {
    const int64_t V = golden_.vocab;
    std::vector<float> a(static_cast<size_t>(V));
    ASSERT_TRUE(f.prefill(golden_.prompt_ids, a.data()).ok());
    float worst = 0;
    for (int k = 0; k < 16; ++k) {
      int32_t id = test::argmax(a.data(), V);
      got->ids.push_back(id);
      if (k >= 8) {  // decode_greedy, then decode of the id it returned
        auto x = f.decode_greedy(id);
        ASSERT_TRUE(x.ok()) << x.error().message;
        got->ids.push_back(id = *x);
      }
      if (want != nullptr) {
        const auto n = std::ptrdiff_t(got->ids.size());
        ASSERT_EQ(got->ids, std::vector<int32_t>(want->ids.begin(), want->ids.begin() + n))
            << "step " << k;
      }
      ASSERT_TRUE(f.decode(id, a.data()).ok());
      if (k >= 8) continue;
      if (want != nullptr) {
        worst = std::max(worst, test::max_abs_diff(a.data(), want->logits[k].data(), V));
      }
      got->logits.push_back(a);
    }
    EXPECT_LE(worst, test::kGoldenTol);
  }

  // `on` against the separate dispatches' run.
  void expect_same_decode(GpuForward& on, const Greedy& off) {
    Greedy got;
    greedy(on, &off, &got);
  }

  // `other` fed what `reference` was fed and returned, with its logits within the bound.
  void expect_same_run(GpuForward& reference, GpuForward& other) {
    Greedy reference_run;
    greedy(reference, nullptr, &reference_run);
    ASSERT_FALSE(HasFatalFailure());
    expect_same_decode(other, reference_run);
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
  // The separate dispatches, made and run once for every mode, not once per mode (a forward
  // takes 0.5-0.9 s to make on lavapipe).
  std::unique_ptr<GpuForward> off = make(model, "INFER_NORM_IN", "0");
  ASSERT_TRUE(off != nullptr);
  const RecordingCounts c_off = off->decode_counts();
  Greedy off_run;
  greedy(*off, nullptr, &off_run);
  ASSERT_FALSE(HasFatalFailure());
  off.reset();
  for (const char* mode : {"p", "1", "2"}) {
    SCOPED_TRACE(std::string("INFER_NORM_IN=") + mode);
    const bool gate_up = mode[0] == '2', ple_only = mode[0] == 'p';
    if (ple_only && !ple) continue;  // without PLE, mode p is mode 0
    std::unique_ptr<GpuForward> on = make(model, "INFER_NORM_IN", mode);
    ASSERT_TRUE(on != nullptr);

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
    const RecordingCounts c_on = on->decode_counts();
    std::printf("[%s] decode dispatches: %d fused, %d apart (%d barriers, %d apart)\n",
                GetParam().name, c_on.dispatches, c_off.dispatches, c_on.barrier_commands,
                c_off.barrier_commands);
    EXPECT_EQ(c_off.dispatches - c_on.dispatches, saved);
    EXPECT_LE(c_on.barrier_commands, c_on.dispatches);
    expect_same_decode(*on, off_run);
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
  expect_same_run(*off, *on);
}

// Long rows on their own products (INFER_MV_LONG_SUBGROUPS=8; INFER_MV_LONG_COLS one past the
// hidden size: the products over the stream, whose rows are H long, keep the default shape, the
// wider ones, such as the MLP's down projection, take the long one): a decode step records
// products on both shapes (SUBGROUPS is spec 3 in a pipeline's name) and keeps the tokens.
TEST_P(ForwardNormInGpu, LongRowProductsOnTheirOwnShapeKeepTheTokens) {
  auto m = Model::load(dir_, LoadOptions{Quant::kAsStored, EmbedScale::kF32}, pool_);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const Model& model = **m;
  std::unique_ptr<GpuForward> off = make(model, "INFER_MV_LONG_SUBGROUPS", "0");
  const test::ScopedEnv cols("INFER_MV_LONG_COLS",
                            std::to_string(model.config().text.hidden_size + 1).c_str());
  std::unique_ptr<GpuForward> on = make(model, "INFER_MV_LONG_SUBGROUPS", "8");
  ASSERT_TRUE(on != nullptr && off != nullptr);
  expect_same_run(*off, *on);
  ASSERT_FALSE(HasFatalFailure());
  // After the run: profiling a step moves the forward on.
  auto profile = on->profile(std::vector<int32_t>{golden_.prompt_ids.front()});
  ASSERT_TRUE(profile.ok()) << profile.error().message;
  int products = 0, long_products = 0;
  for (const CommandTime& c : *profile) {  // e.g. matvec_bf16{0=64,1=2,2=1,3=8,5=4}
    if (c.label.rfind("matvec_", 0) != 0) continue;
    ++products;
    long_products += c.label.find(",3=8,") != std::string::npos;
  }
  EXPECT_GT(long_products, 0);
  EXPECT_LT(long_products, products);
}

// The step words (position, ids) in host memory (INFER_STEP_HOST=1, a discrete GPU without
// host-visible device memory) or in device memory (the default where the device has it, as
// lavapipe does): the same kernels read the same words, so the same tokens.
TEST_P(ForwardNormInGpu, StepWordsInHostOrDeviceMemoryKeepTheTokens) {
  auto m = Model::load(dir_, LoadOptions{Quant::kAsStored, EmbedScale::kF32}, pool_);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const Model& model = **m;
  std::unique_ptr<GpuForward> host = make(model, "INFER_STEP_HOST", "1");
  std::unique_ptr<GpuForward> device = make(model, "INFER_STEP_HOST", "0");
  ASSERT_TRUE(host != nullptr && device != nullptr);
  expect_same_run(*host, *device);
}

INSTANTIATE_TEST_SUITE_P(ForwardFixtures, ForwardNormInGpu,
                         ::testing::ValuesIn(test::kArchitectureCases),
                         test::ParamName());

}  // namespace
}  // namespace infer::gpu
