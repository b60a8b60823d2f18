// Token embedding and PLE inputs: pipelines sized from the device (all built in create()), and
// record().
#include "gpu/ops/embed.h"

#include <algorithm>
#include <string>
#include <vector>

#include "base/check.h"
#include "gpu/context.h"
#include "gpu/ops/op_common.h"
#include "shaders/embed.h"
#include "shaders/step.h"

namespace infer::gpu {
namespace {

static_assert(sizeof(shader::EmbedPush) == 4 * sizeof(uint32_t),
              "EmbedPush must match shaders/embed.h in the shader (32-bit scalars only)");
static_assert(sizeof(shader::PleInputsPush) == 5 * sizeof(uint32_t),
              "PleInputsPush must match shaders/embed.h in the shader (32-bit scalars only)");

// One weight unit an invocation: a row of H = 5376 is 11-21 workgroups of this size, so even
// T = 1 spreads over several compute units.
constexpr uint32_t kEmbedInvocations = 256;

constexpr WeightFormat kFormats[] = {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kQ8_0,
                                     WeightFormat::kQ4_0};

// Columns one invocation of embed.comp writes (UNIT in common/weights.glsl).
uint32_t unit_cols(WeightFormat f) {
  switch (f) {
    case WeightFormat::kF32:
      return 1;
    case WeightFormat::kBF16:
      return 2;
    case WeightFormat::kQ8_0:
    case WeightFormat::kQ4_0:
      return 8;
  }
  return 1;
}

}  // namespace

struct EmbedOps::Pipelines {
  const VulkanContext* ctx = nullptr;
  uint32_t embed_local = 0;
  std::unique_ptr<Pipeline> embed[std::size(kFormats)];  // indexed by WeightFormat
  // ple_inputs rows are P = 256 floats: one subgroup a row (as RmsNormOps' short rows).
  std::unique_ptr<Pipeline> ple_inputs;
};

EmbedOps::~EmbedOps() = default;

Result<std::unique_ptr<EmbedOps>> EmbedOps::create(const VulkanContext& ctx) {
  std::unique_ptr<EmbedOps> op(new EmbedOps());
  op->p_ = std::make_unique<Pipelines>();
  Pipelines& p = *op->p_;
  p.ctx = &ctx;
  const WorkgroupSize embed_size = workgroup_size(ctx.info(), kEmbedInvocations);
  p.embed_local = embed_size.local;
  for (WeightFormat f : kFormats) {
    PipelineDesc desc;
    desc.variant = std::string("embed_") + weight_format_name(f);
    desc.bindings = {Access::kRead, Access::kRead, Access::kWrite};
    desc.push_bytes = sizeof(shader::EmbedPush);
    desc.spec = {{INFER_EMBED_SPEC_LOCAL_SIZE, embed_size.local}};
    INFER_TRY(p.embed[size_t(f)], Pipeline::create(ctx, desc));
  }
  const WorkgroupSize row = workgroup_size(ctx.info(), ctx.info().subgroup_size);
  PipelineDesc desc;
  desc.variant = "ple_inputs";
  desc.bindings = {Access::kRead, Access::kRead, Access::kRead, Access::kWrite};
  desc.push_bytes = sizeof(shader::PleInputsPush);
  desc.spec = {{INFER_EMBED_SPEC_LOCAL_SIZE, row.local},
               {INFER_EMBED_SPEC_MAX_SUBGROUPS, row.max_subgroups}};
  INFER_TRY(p.ple_inputs, Pipeline::create(ctx, desc));
  return op;
}

Result<void> EmbedOps::embed(Recorder& rec, Binding step, const GpuMatrix& table, float scale,
                             Binding x, uint32_t T) const {
  const DeviceInfo& info = p_->ctx->info();
  INFER_CHECK(T > 0 && T <= info.max_workgroup_count[1], "embed: T = %u", T);
  INFER_CHECK(
      table.rows > 0 && table.cols > 0 && table.rows <= UINT32_MAX && table.cols <= UINT32_MAX,
      "embed: table of %lld x %lld", (long long)table.rows, (long long)table.cols);
  INFER_CHECK(table.buffer.size() >= row_bytes(table.format, table.cols) * size_t(table.rows),
              "embed: table \"%s\" too small", table.buffer.name().c_str());
  check_words("embed", "step", step, INFER_STEP_WORDS(uint64_t(T)));
  check_words("embed", "x", x, uint64_t(T) * uint64_t(table.cols));
  const uint32_t cols = uint32_t(table.cols);
  const uint32_t units = (cols + unit_cols(table.format) - 1) / unit_cols(table.format);
  const shader::EmbedPush push{uint32_t(table.rows), cols, T, scale};
  Groups g;
  g.x = (units + p_->embed_local - 1) / p_->embed_local;
  g.y = T;
  return rec.dispatch(*p_->embed[size_t(table.format)], {Binding{&table.buffer}, step, x}, push, g);
}

Result<void> EmbedOps::ple_inputs(Recorder& rec, Binding proj, float proj_scale, Binding norm_w,
                                  Binding rows, float ple_scale, Binding ple, uint32_t T,
                                  uint32_t L, uint32_t P, float eps) const {
  INFER_CHECK(T > 0 && L > 0 && P > 0, "ple_inputs: T %u, L %u, P %u", T, L, P);
  const uint64_t n = uint64_t(T) * L * P;
  check_words("ple_inputs", "proj", proj, n);
  check_words("ple_inputs", "norm_w", norm_w, P);
  check_words("ple_inputs", "rows", rows, n);
  check_words("ple_inputs", "ple", ple, n);
  const shader::PleInputsPush push{T * L, P, proj_scale, ple_scale, eps};
  return rec.dispatch(*p_->ple_inputs, {proj, norm_w, rows, ple}, push,
                      wrapped_groups(p_->ctx->info(), T * L));
}

}  // namespace infer::gpu
