// Small element-wise and per-row ops between the big kernels: the gated GELU of the PLE block,
// the logit soft-cap, and argmax / top-k over logits for sampling on the GPU.
#pragma once

#include <cstdint>
#include <memory>

#include "base/result.h"
#include "gpu/buffer.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"

namespace infer::gpu {

class VulkanContext;

class ElementwiseOps {
 public:
  static Result<std::unique_ptr<ElementwiseOps>> create(const VulkanContext& ctx);
  ~ElementwiseOps();

  // out[t·n + j] = gelu_tanh(a[t·a_stride + a_off + j]) · b[t·b_stride + b_off + j], t < T, j < n
  // (strides and offsets in floats: the PLE block reads slice l of ple [T, L·P]). out may be a.
  Result<void> gelu_mul(Recorder& rec, Binding a, uint32_t a_stride, uint32_t a_off, Binding b,
                        uint32_t b_stride, uint32_t b_off, Binding out, uint32_t T,
                        uint32_t n) const;

  // y[i] = tanh(y[i] / cap) · cap for i < count, in place (§4.10).
  Result<void> softcap(Recorder& rec, Binding y, uint32_t count, float cap) const;

  // out[t] = the index of the largest of logits[t, 0..V) (the lowest index on ties), t < T.
  // out: uint32 [T].
  Result<void> argmax(Recorder& rec, Binding logits, Binding out, uint32_t T, uint32_t V) const;

  // The k largest logits of each row, descending (ties: lower index first): values f32 [T, k],
  // indices uint32 [T, k]; k <= kMaxTopK. The host samples from them (temperature, top-p).
  static constexpr uint32_t kMaxTopK = 128;
  Result<void> top_k(Recorder& rec, Binding logits, Binding values, Binding indices, uint32_t T,
                     uint32_t V, uint32_t k) const;

 private:
  ElementwiseOps() = default;
  struct Pipelines;
  std::unique_ptr<Pipelines> p_;
};

}  // namespace infer::gpu
