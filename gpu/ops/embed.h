// The per-chunk inputs on the GPU (GEMMA4_TEXT.md §4.2, §4.3): token embeddings gathered by the
// ids in the step buffer, and the PLE inputs combined from the context projection and the table
// rows the host gathered (the PLE table stays in host memory, DESIGN.md §7).
#pragma once

#include <cstdint>
#include <memory>

#include "base/result.h"
#include "gpu/buffer.h"
#include "gpu/ops/matvec.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"

namespace infer::gpu {

class VulkanContext;

class EmbedOps {
 public:
  static Result<std::unique_ptr<EmbedOps>> create(const VulkanContext& ctx);
  ~EmbedOps();

  // x[t, :] = table[ids[t], :] · scale for t < T, ids at step[INFER_STEP_IDS + t] (shaders/step.h).
  // table: [V, H] F32 or BF16 (as stored); x: [T, H] f32.
  Result<void> embed(Recorder& rec, Binding step, const GpuMatrix& table, float scale, Binding x,
                     uint32_t T) const;

  // ple[t, l·P + j] = (rmsnorm(proj[t, l·P ..] · proj_scale) · norm_w + rows[t, l·P + j] ·
  //                    ple_scale) · 2^(-1/2)
  // for t < T, l < L, j < P (§4.3.2-4): proj = per_layer_model_projection · x (a matvec before
  // this), rows = the table rows of the chunk's ids, f32, written by the host. ple may be proj.
  Result<void> ple_inputs(Recorder& rec, Binding proj, float proj_scale, Binding norm_w,
                          Binding rows, float ple_scale, Binding ple, uint32_t T, uint32_t L,
                          uint32_t P, float eps) const;

 private:
  EmbedOps() = default;
  struct Pipelines;
  std::unique_ptr<Pipelines> p_;
};

}  // namespace infer::gpu
