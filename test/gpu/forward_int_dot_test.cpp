// The forward with integer-dot products on x quantized once a product (INFER_INTDOT=2,
// Q4_0 and Q8_0 weights): add_norm quantizing the next product's input as it writes it
// (NormOps::writes_x8, the default), the split decode attention the o projection's
// (AttentionOps::writes_out8) and gate-up the down projection's (GateUpOp::writes_x8,
// INFER_X8_GATE_UP=1) against a dispatch of its own before each product
// (INFER_X8_FUSE=0), on every fixture architecture: the dispatches it saves per decode token and
// the same logits bit for bit (both quantize the same f32 h with quant_x.glsl, whose bits
// matvec_dot_test.cpp pins against the CPU's quantize_row_q8_0), prompt chunks of T > 1 too.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "gpu/gpu_forward.h"
#include "gpu/ops/norm.h"
#include "model/model.h"
#include "model/quant.h"
#include "test/gpu/forward_fixture_test.h"
#include "test/gpu/gpu_test_env.h"
#include "test/model/golden_fixture.h"
#include "test/scoped_env.h"
#include "test/test_paths.h"

namespace infer::gpu {
namespace {

using Case = test::FixtureCase;

class ForwardIntDotGpu : public GpuFixtureTest {
 protected:
  // A forward made while INFER_X8_FUSE = fuse and INFER_X8_GATE_UP = gate_up, integer dots on
  // prepared x.
  std::unique_ptr<GpuForward> make(const Model& model, const char* fuse, const char* gate_up) {
    const test::ScopedEnv dots("INFER_INTDOT", "2");
    const test::ScopedEnv env("INFER_X8_FUSE", fuse);
    const test::ScopedEnv env_gate_up("INFER_X8_GATE_UP", gate_up);
    return make_forward(model);
  }

  // The prompt's last logits, then 6 greedy decode steps' logits.
  std::vector<std::vector<float>> run(GpuForward& f) {
    const int64_t V = golden_.vocab;
    std::vector<std::vector<float>> out;
    std::vector<float> a(static_cast<size_t>(V));
    EXPECT_TRUE(f.prefill(golden_.prompt_ids, a.data()).ok());
    out.push_back(a);
    for (int k = 0; k < 6; ++k) {
      EXPECT_TRUE(f.decode(test::argmax(a.data(), V), a.data()).ok());
      out.push_back(a);
    }
    return out;
  }
};

TEST_P(ForwardIntDotGpu, NormQuantizedInputSavesDispatchesAndKeepsTheLogits) {
  ASSERT_TRUE(ctx_->info().integer_dot_product) << "no shaderIntegerDotProduct";
  for (Quant quant : {Quant::kQ4_0, Quant::kQ8_0}) {
    SCOPED_TRACE(quant == Quant::kQ4_0 ? "Q4_0" : "Q8_0");
    auto m = Model::load(dir_, LoadOptions{quant, EmbedScale::kF32}, pool_);
    ASSERT_TRUE(m.ok()) << m.error().message;
    const Model& model = **m;
    std::unique_ptr<GpuForward> apart = make(model, "0", "0"), fused = make(model, "1", "0"),
                                gate_up = make(model, "1", "1");
    ASSERT_TRUE(apart != nullptr && fused != nullptr && gate_up != nullptr);
    const int a = apart->decode_counts().dispatches, f = fused->decode_counts().dispatches,
              g = gate_up->decode_counts().dispatches;
    std::printf("[%s] decode dispatches: %d with add_norm's int8 h, %d with gate-up's too, %d "
                "with their own\n", GetParam().name, f, g, a);
    // At least the gate-up of every layer and the qkv of all but the first (whose input comes
    // from rms_norm, not add_norm) take add_norm's copy, and with INFER_X8_GATE_UP=1 every down
    // projection gate-up's; none where rows of H cannot be quantized (dense-mini's 144: its
    // products stay in the stored format, f32 activations).
    // Every layer of head dim % 32 == 0 on the split decode (d <= 256) takes the attention's
    // int8 output for its o projection (o's columns, n_q · d, quantizable even where H is not).
    const int L = model.config().text.num_hidden_layers;
    int attention8 = 0;
    for (const LayerPlan& plan : model.config().layers) {
      attention8 += plan.head_dim % 32 == 0 && plan.head_dim <= 256;
    }
    if (model.config().text.hidden_size % 32 == 0) {
      EXPECT_GE(a - f, 2 * L - 1 + attention8);
      EXPECT_EQ(f - g, L);
    } else {
      EXPECT_EQ(a - f, attention8);
      EXPECT_EQ(f, g);
    }
    const auto want = run(*apart);
    for (GpuForward* other : {fused.get(), gate_up.get()}) {
      const auto got = run(*other);
      ASSERT_EQ(want.size(), got.size());
      for (size_t k = 0; k < want.size(); ++k) {
        EXPECT_EQ(0, std::memcmp(want[k].data(), got[k].data(), want[k].size() * sizeof(float)))
            << "step " << k << (other == gate_up.get() ? " (gate-up's int8 act)" : "");
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ForwardFixtures, ForwardIntDotGpu, ::testing::ValuesIn(test::kFixtureCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace infer::gpu
