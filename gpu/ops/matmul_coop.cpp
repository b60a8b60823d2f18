// The cooperative-matrix prefill products' pipelines, and the pass that quantizes the
// integer-dot products' activations once a product into a scratch the kernels own.
#include "gpu/ops/matmul_coop.h"

#include <memory>
#include <span>
#include <string>
#include <utility>

#include "base/check.h"
#include "gpu/ops/matmul_tuning.h"
#include "gpu/ops/op_common.h"
#include "shaders/matvec.h"

namespace infer::gpu {
namespace {

// coop_x_prep.comp's workgroup: one invocation a block of 32 activations.
constexpr uint32_t kCoopPrepInvocations = 64;

}  // namespace

Result<void> create_coop_kernels(const VulkanContext& ctx, WeightFormat format, bool gate_up,
                                 MatvecKernels& k) {
  INFER_TRY(const bool fits, resolve_coop_tuning(ctx, format, gate_up, k.tuning));
  if (!fits) return Ok{};
  const MatvecTuning& t = k.tuning;
  const uint32_t subgroup = ctx.info().subgroup_size;
  // f32 x converted as the kernel stages it, so no preparing pass; with integer dots on,
  // decode's products keep int8 x and prefill's take f16 like every other format's.
  PipelineDesc coop;
  coop.variant = std::string(gate_up ? "gate_up_matmul_coopmat_" : "matmul_coopmat_") +
                 weight_format_name(format);
  coop.bindings = {Access::kRead, Access::kRead, Access::kWrite, Access::kRead};
  coop.bindings.resize(gate_up ? 4 : 3);
  coop.push_bytes = sizeof(shader::MatvecPush);
  coop.spec = {{INFER_MATMUL_SPEC_LOCAL_SIZE, coop_subgroups(t) * subgroup},
               {INFER_MATMUL_COOP_SPEC_ROWS, t.coop_rows},
               {INFER_MATMUL_COOP_SPEC_TOKENS, t.coop_tokens},
               {INFER_MATMUL_COOP_SPEC_SG_ROWS, t.coop_sg_rows},
               {INFER_MATMUL_COOP_SPEC_SG_TOKENS, t.coop_sg_tokens}};
  coop.required_subgroup_size = subgroup;  // gl_SubgroupID names the subgroup's share
  INFER_TRY(k.coop, Pipeline::create(ctx, coop));
  // The half tile: as many subgroups, each on half the tokens (where the shape allows).
  const uint32_t below = ctx.tuning().coopmat_small_below;
  if (below > 0 && t.coop_rows % (2 * t.coop_sg_rows) == 0 && t.coop_sg_tokens % 32 == 0 &&
      t.coop_rows / 2 * INFER_MATMUL_COOP_COLS / 4 % (coop_subgroups(t) * subgroup) == 0) {
    coop.spec[1].value = t.coop_rows / 2;
    coop.spec[4].value = t.coop_sg_tokens / 2;
    INFER_TRY(k.coop_small, Pipeline::create(ctx, coop));
    k.coop_small_below = below;
  }
  return Ok{};
}

Result<void> create_int8_prep(const VulkanContext& ctx, MatvecKernels& k) {
  if (k.coop_prep != nullptr) return Ok{};
  PipelineDesc prep;
  prep.variant = "coop_x_prep_int8";
  prep.bindings = {Access::kRead, Access::kWrite};
  prep.push_bytes = sizeof(shader::MatvecPush);
  prep.spec = {{INFER_COOP_PREP_SPEC_LOCAL_SIZE, kCoopPrepInvocations}};
  INFER_TRY(k.coop_prep, Pipeline::create(ctx, prep));
  return Ok{};
}

Result<Binding> record_coop_x_prep(Recorder& rec, const MatvecKernels& k, Binding x, int64_t cols,
                                   uint32_t n_tokens) {
  // 4 bytes a quad and a 4-byte scale a block of 8 quads.
  const VkDeviceSize bytes = int8_x_bytes(n_tokens, uint64_t(cols));
  if (k.coop_x.empty() || k.coop_x.back()->size() < bytes) {
    INFER_TRY(Buffer b, Buffer::create(rec.context(), bytes, BufferKind::kDevice, "coop x"));
    k.coop_x.push_back(std::make_unique<Buffer>(std::move(b)));
  }
  const Binding out{k.coop_x.back().get()};
  shader::MatvecPush push{};
  push.cols = uint32_t(cols);
  push.n_tokens = n_tokens;
  push.x_stride = uint32_t(cols);
  const Groups g = wrapped_groups(
      rec.context().info(), div_up(uint64_t(n_tokens) * uint64_t(cols / 32), kCoopPrepInvocations));
  const Binding bindings[] = {x, out};
  INFER_TRY_VOID(rec.dispatch(*k.coop_prep, std::span<const Binding>(bindings, 2), &push,
                              uint32_t(sizeof(push)), g));
  return out;
}

}  // namespace infer::gpu
