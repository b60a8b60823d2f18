// The integer-dot-product kernels of a Q8_0/Q4_0 matvec family (shaders/matvec_dot.comp): their
// workgroup shape and the x_int8 preparation they read, for gpu/ops/matvec.cpp.
#include <algorithm>
#include <string>
#include <vector>

#include "base/check.h"
#include "gpu/context.h"
#include "gpu/ops/matmul_coop.h"
#include "gpu/ops/matvec_dot.h"
#include "gpu/ops/op_common.h"
#include "shaders/matvec.h"

namespace infer::gpu {
namespace {

// matvec_dot.comp's workgroup: 4 subgroups of the plain kernel's rows a subgroup. On the H200
// (12B Q4_0) 2 or 4 subgroups of 2 or 4 rows ran within 0.5% of each other, 1 row 8% slower.
constexpr uint32_t kDefaultDotSubgroups = 4;

std::string variant_name(const char* family, WeightFormat f) {
  return std::string(family) + "_" + weight_format_name(f);
}

}  // namespace

Result<void> create_dot_kernels(const VulkanContext& ctx, const std::vector<Access>& bindings,
                                MatvecTuning tuning, MatvecKernels& k) {
  const DeviceInfo& info = ctx.info();
  const uint32_t subgroup = std::max(1u, info.subgroup_size);
  if (tuning.dot_subgroups_per_group == 0) tuning.dot_subgroups_per_group = kDefaultDotSubgroups;
  if (tuning.dot_rows_per_subgroup == 0) tuning.dot_rows_per_subgroup = tuning.rows_per_subgroup;
  k.tuning.dot_rows_per_subgroup = tuning.dot_rows_per_subgroup;
  INFER_TRY_VOID(create_int8_prep(ctx, k));
  tuning.dot_subgroups_per_group = std::min(tuning.dot_subgroups_per_group,
                                            std::max(1u, info.max_workgroup_invocations / subgroup));
  k.tuning.dot_subgroups_per_group = tuning.dot_subgroups_per_group;
  const ReduceShape dot_shape = reduce_shape(info, tuning.dot_subgroups_per_group);
  for (uint32_t tokens : {1u, tuning.tokens_per_group}) {
    PipelineDesc d;
    d.variant = variant_name(k.gate_up ? "gate_up_dot" : "matvec_dot", k.format);
    d.bindings = bindings;
    d.push_bytes = sizeof(shader::MatvecPush);
    d.spec = {{INFER_MATVEC_SPEC_LOCAL_SIZE, dot_shape.local_size},
              {INFER_MATVEC_SPEC_ROWS, tuning.dot_rows_per_subgroup},
              {INFER_MATVEC_SPEC_TOKENS, tokens},
              {INFER_MATVEC_SPEC_SUBGROUPS, tuning.dot_subgroups_per_group}};
    d.required_subgroup_size = dot_shape.required_subgroup_size;
    INFER_TRY(std::unique_ptr<Pipeline> p, Pipeline::create(ctx, d));
    (tokens == 1 ? k.dot_one_token : k.dot_many_tokens) = std::move(p);
  }
  return Ok{};
}

}  // namespace infer::gpu
