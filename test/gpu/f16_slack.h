// What f16 operands allow on a forward's logits, for the tests that compare a GPU forward with
// the CPU or the golden fixtures.
#pragma once

#include <cstdio>
#include <functional>
#include <vector>

#include "gpu/context.h"
#include "model/ops/matmul.h"
#include "test/model/golden_fixture.h"

namespace infer::gpu {

// Where this device's prefill products take f16 operands (DeviceInfo::coop_matrix_khr: the
// tensor-core kernel, shaders/matmul_coopmat.comp), twice what f16 operands move run()'s logits
// on the CPU (MatmulActivations::kF16, activations and weights of prefill products rounded to f16,
// against kF32); 0 elsewhere. Each f16 operand errs by up to 2^-11 of itself against f32's 2^-24,
// and these random-weight models amplify such perturbations through their layers (e2b-long's
// 200-token prompt: ~0.5 on logits of std 2), so the bound is measured on the model rather than
// derived. Twice: the GPU rounds activations that its own f32 sums made, which differ from the
// CPU's in their last bits, so its roundings are another draw of the same size.
inline float f16_slack(const VulkanContext& ctx, const char* name,
                       const std::function<std::vector<float>()>& run) {
  if (!ctx.info().coop_matrix_khr) return 0.0f;
  const std::vector<float> f32 = run();
  set_matmul_activations(MatmulActivations::kF16);
  const std::vector<float> f16 = run();
  set_matmul_activations(MatmulActivations::kF32);  // as gpu_test_env.cpp sets it
  const float slack = 2.0f * test::max_abs_diff(f16.data(), f32.data(), int64_t(f32.size()));
  std::printf("[%s] f16 operands' slack on logits %.3e\n", name, double(slack));
  return slack;
}

}  // namespace infer::gpu
