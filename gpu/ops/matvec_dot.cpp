// The integer-dot-product kernels of a Q8_0/Q4_0 matvec family (shaders/matvec_dot.comp): their
// workgroup shape and variants (x quantized by each workgroup, or prepared once a product; gate-up
// writing its output quantized too), for gpu/ops/matvec.cpp.
#include <algorithm>
#include <cstdlib>
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

// matvec_dot.comp: every workgroup quantizes its tokens of x (~10 instructions an activation)
// before its rows' dot products (~1.5 a weight and row for Q4_0), so it takes more rows than
// matvec.comp to amortize that: 4 subgroups. Its shared memory holds up to 64 groups of x (16384
// columns, 18 KB: a 12B model's down projection) for T = 1, 24 groups (6144 columns) a token for
// several, within 32 KB; wider rows take matvec.comp.
constexpr uint32_t kDefaultDotSubgroups = 4;
constexpr uint32_t kDotMaxGroupsOne = 64;
constexpr uint32_t kDotMaxGroupsMany = 24;
constexpr uint32_t kDotSharedBudget = 32 * 1024;
constexpr uint32_t kDotUnbounded = 0xffffffffu;  // dot_groups_*: prepared x, any width

std::string variant_name(const char* family, WeightFormat f) {
  return std::string(family) + "_" + weight_format_name(f);
}

}  // namespace

Result<void> create_dot_kernels(const VulkanContext& ctx, const VkPhysicalDeviceProperties& props,
                                const std::vector<Access>& bindings, MatvecTuning tuning,
                                MatvecKernels& k) {
  const DeviceInfo& info = ctx.info();
  const uint32_t subgroup = std::max(1u, info.subgroup_size);
  const bool gate_up = k.gate_up;
  const WeightFormat format = k.format;
  if (tuning.dot_subgroups_per_group == 0) {
    tuning.dot_subgroups_per_group = env_uint("INFER_DOT_SUBGROUPS", kDefaultDotSubgroups, 1, 64);
  }
  if (tuning.dot_rows_per_subgroup == 0) {
    tuning.dot_rows_per_subgroup = env_uint("INFER_DOT_ROWS", tuning.rows_per_subgroup, 1, 16);
  }
  k.tuning.dot_rows_per_subgroup = tuning.dot_rows_per_subgroup;
  if (tuning.dot_input == DotInput::kAuto) {
    const char* v = std::getenv("INFER_INTDOT");
    tuning.dot_input = v != nullptr && v[0] == '2' ? DotInput::kPrepared : DotInput::kShared;
  }
  k.tuning.dot_input = tuning.dot_input;
  k.dot_prepared = tuning.dot_input == DotInput::kPrepared;
  if (k.dot_prepared) INFER_TRY_VOID(create_x8_prep(ctx, k));
  tuning.dot_subgroups_per_group = std::min(tuning.dot_subgroups_per_group,
                                            std::max(1u, info.max_workgroup_invocations / subgroup));
  k.tuning.dot_subgroups_per_group = tuning.dot_subgroups_per_group;
  const ReduceShape dot_shape = reduce_shape(info, tuning.dot_subgroups_per_group);
  const uint32_t budget = std::min(props.limits.maxComputeSharedMemorySize, kDotSharedBudget);
  for (uint32_t tokens : {1u, tuning.tokens_per_group}) {
    // Prepared x: no shared memory, so any width (the spec constant is unused).
    const uint32_t groups =
        k.dot_prepared ? kDotUnbounded
                       : std::min(tokens == 1 ? kDotMaxGroupsOne : kDotMaxGroupsMany,
                                  budget / (tokens * INFER_MATVEC_DOT_GROUP_BYTES));
    if (groups == 0) continue;  // the f32 kernel takes these products
    PipelineDesc d;
    d.variant = variant_name(
        gate_up ? (k.dot_prepared ? "gate_up_dot_pre" : "gate_up_dot")
                : (k.dot_prepared ? "matvec_dot_pre" : "matvec_dot"),
        format);
    d.bindings = bindings;
    d.push_bytes = sizeof(shader::MatvecPush);
    d.spec = {{INFER_MATVEC_SPEC_LOCAL_SIZE, dot_shape.local_size},
              {INFER_MATVEC_SPEC_ROWS, tuning.dot_rows_per_subgroup},
              {INFER_MATVEC_SPEC_TOKENS, tokens},
              {INFER_MATVEC_SPEC_SUBGROUPS, tuning.dot_subgroups_per_group},
              {INFER_MATVEC_DOT_SPEC_GROUPS, k.dot_prepared ? 1u : groups}};
    d.required_subgroup_size = dot_shape.required_subgroup_size;
    INFER_TRY(std::unique_ptr<Pipeline> p, Pipeline::create(ctx, d));
    (tokens == 1 ? k.dot_one_token : k.dot_many_tokens) = std::move(p);
    (tokens == 1 ? k.dot_groups_one : k.dot_groups_many) = groups;
    if (tokens == 1 && gate_up && k.dot_prepared && tuning.dot_x8_out &&
        32 % tuning.dot_rows_per_subgroup == 0) {
      // The same shape: a subgroup's rows lie in one block of 32, whose last rows' lane
      // quantizes it (matvec_dot.comp's arrive_x8).
      d.variant = variant_name("gate_up_dot_pre_x8", format);
      d.bindings.push_back(Access::kWrite);      // 4: y quantized
      d.bindings.push_back(Access::kReadWrite);  // 5: the blocks' counters
      INFER_TRY(k.dot_x8_out, Pipeline::create(ctx, d));
      const std::vector<uint32_t> zeros(MatvecKernels::kX8CounterBlocks, 0u);
      INFER_TRY(k.x8_counters, Buffer::create(ctx, zeros.size() * sizeof(uint32_t),
                                              BufferKind::kDevice, "gate-up x8 block counters"));
      INFER_TRY_VOID(upload(ctx, k.x8_counters, 0, zeros.data(), zeros.size() * sizeof(uint32_t)));
    }
  }
  return Ok{};
}

}  // namespace infer::gpu
