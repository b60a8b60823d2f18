// RMSNorm family on the GPU (GEMMA4_TEXT.md §4.1): x̂·w, weight as stored (no +1), ε inside the
// root, fp32 throughout. One op object holds every pipeline of the family.
#pragma once

#include <cstdint>
#include <memory>

#include "base/result.h"
#include "gpu/buffer.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"

namespace infer::gpu {

class VulkanContext;

class RmsNormOps {
 public:
  // row_n: the longest row the model normalizes (H), when known. The whole-row pipelines then
  // get no more invocations than it has elements (a small model on a CPU device such as
  // lavapipe, where idle invocations of a 512-wide workgroup cost ~8x the work); 0: the full
  // 512. Any n still works on any pipeline. int8_h: also make add_norm's variant that writes h
  // quantized (writes_int8_h), for a forward whose products take int8 x.
  static Result<std::unique_ptr<RmsNormOps>> create(const VulkanContext& ctx, uint32_t row_n = 0,
                                                 bool int8_h = false);
  ~RmsNormOps();

  // out[r, :] = rmsnorm(x[r, :]) · w for r < rows, rows of n floats (H for the stream, d per
  // head, P per PLE slice). w.buffer == nullptr: no weight (v_norm, the router's input norm).
  // out may be the same range as x.
  Result<void> rms_norm(Recorder& rec, Binding x, Binding w, Binding out, uint32_t rows,
                        uint32_t n, float eps) const;

  // The residual step that ends a block, for t < T over rows of n = H floats:
  //   x[t] = (x[t] + rmsnorm(o[t]) · w_post) · scale
  // and then, when next_w.buffer != nullptr, h[t] = rmsnorm(x[t]) · next_w (the next block's
  // input norm, fused so the stream is read once). scale is the layer scalar on the layer's last
  // block (§4.4), else 1.
  // Given h_int8 (where writes_int8_h(n)), h goes there too quantized for the integer-dot matvecs
  // (shaders/coop_x_prep.comp's INT8 layout, T rows), so the next product skips that dispatch.
  Result<void> add_norm(Recorder& rec, Binding x, Binding o, Binding w_post, float scale,
                        Binding next_w, Binding h, uint32_t T, uint32_t n, float eps,
                        Binding h_int8 = {}) const;
  // Whether add_norm takes h_int8 for rows of n: the registers form's variant, made where its row
  // fits in shared memory, and n % 32 == 0.
  bool writes_int8_h(uint32_t n) const;

  // MoE's two branches (§4.4): out[t] = rmsnorm(a[t]) · wa + rmsnorm(b[t]) · wb, rows of n.
  // out may be the same range as a.
  Result<void> norm_sum(Recorder& rec, Binding a, Binding wa, Binding b, Binding wb, Binding out,
                        uint32_t T, uint32_t n, float eps) const;

 private:
  RmsNormOps() = default;
  struct Pipelines;
  std::unique_ptr<Pipelines> p_;
};

}  // namespace infer::gpu
