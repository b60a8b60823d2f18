// The MoE expert branch on the GPU (GEMMA4_TEXT.md §4.9): routing (router softmax, top-k,
// renormalised × per_expert_scale) and the routed experts, with expert ids read from a buffer so
// a decode step stays one recording with no readback.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "base/result.h"
#include "gpu/buffer.h"
#include "gpu/ops/matvec.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"
#include "model/matrix.h"

namespace infer::gpu {

class VulkanContext;

// E expert matrices of one shape and format, stacked in one buffer, rows in the device layout
// (gpu/ops/matvec.h): expert e from byte e · rows · device_row_bytes(format, cols).
struct GpuExperts {
  WeightFormat format = WeightFormat::kF32;
  int64_t experts = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  Buffer buffer;
};

// With a pool, its threads repack the rows side by side (upload_rows).
Result<GpuExperts> upload_experts(const VulkanContext& ctx, std::span<const Matrix> experts,
                                  std::string name, ThreadPool* pool = nullptr);

struct MoeDims {
  uint32_t T = 1;     // tokens
  uint32_t H = 0;     // hidden size
  uint32_t E = 0;     // experts
  uint32_t k = 0;     // experts per token
  uint32_t I = 0;     // expert intermediate size
  float eps = 1e-6f;
};

class MoeOps {
 public:
  // expert_format: the format of the stacked experts; max_T, I and k size the op's scratch.
  static Result<std::unique_ptr<MoeOps>> create(const VulkanContext& ctx,
                                                WeightFormat expert_format, uint32_t max_T,
                                                uint32_t max_k, uint32_t max_I, uint32_t max_E);
  ~MoeOps();

  // Routing of x [T, H] (the stream before the FFN): logits = router · (rmsnorm(x) ⊙ scale ·
  // H^(-1/2)), softmax, the k largest (ties to the lower index), weights p_j / Σp ·
  // per_expert_scale[e_j]. idx: uint32 [T, k], w: f32 [T, k]. router: F32 or BF16 [E, H].
  Result<void> route(Recorder& rec, const MoeDims& dims, Binding x, Binding router_scale,
                     const GpuMatrix& router, Binding per_expert_scale, Binding idx,
                     Binding w) const;

  // out[t] = Σ_j w[t, j] · down_e(gelu(gate_e · x2[t]) ⊙ (up_e · x2[t])), e = idx[t, j];
  // gate_up: E × [2I, H] (gate rows first), down: E × [H, I]; x2, out: [T, H] f32.
  Result<void> experts(Recorder& rec, const MoeDims& dims, Binding x2, const GpuExperts& gate_up,
                       const GpuExperts& down, Binding idx, Binding w, Binding out) const;

 private:
  MoeOps() = default;
  struct Pipelines;
  std::unique_ptr<Pipelines> p_;
};

}  // namespace infer::gpu
