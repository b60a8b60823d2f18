// MoE ops: stacked expert upload, routing (router logits, then softmax and top-k per token) and the
// routed experts (gate-up per (token, expert) pair, then down and the weighted sum per token), all
// reading expert ids from device buffers.
#include "gpu/ops/moe.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/check.h"
#include "gpu/context.h"
#include "gpu/ops/op_common.h"
#include "shaders/moe.h"

namespace infer::gpu {
namespace {

static_assert(sizeof(shader::MoePush) == 7 * sizeof(uint32_t),
              "MoePush must match shaders/moe.h in the shader (32-bit scalars only)");

constexpr uint32_t kRowsPerGroup = 2;    // output rows a reducing workgroup owns
constexpr uint32_t kTokensPerTopk = 64;  // tokens (one invocation each) a top-k workgroup owns

// Checks that binding b holds at least `bytes` bytes past its offset.
void check_holds(const Binding& b, uint64_t bytes, const char* what) {
  INFER_CHECK(b.buffer != nullptr, "moe: %s has no buffer", what);
  INFER_CHECK(b.buffer->size() >= b.offset && b.buffer->size() - b.offset >= bytes,
              "moe: %s \"%s\" holds %llu bytes, needs %llu", what, b.buffer->name().c_str(),
              (unsigned long long)(b.buffer->size() - b.offset), (unsigned long long)bytes);
}

}  // namespace

struct MoeOps::Pipelines {
  uint32_t max_T = 0, max_k = 0, max_I = 0, max_E = 0;
  WeightFormat format = WeightFormat::kF32;
  std::unique_ptr<Pipeline> router_f32, router_bf16, topk, gate_up, down;
  Buffer logits;  // [max_T, max_E] f32: router output, read by top-k
  Buffer act;     // [max_T · max_k, max_I] f32: gelu(gate) · up of every routed pair
};

MoeOps::~MoeOps() = default;

Result<GpuExperts> upload_experts(const VulkanContext& ctx, std::span<const Matrix> experts,
                                  std::string name, ThreadPool* pool) {
  if (experts.empty()) return make_error(ErrorCode::kShape, name + ": no experts");
  const Matrix& m0 = experts[0];
  if (m0.rows <= 0 || m0.cols <= 0) return make_error(ErrorCode::kShape, name + ": empty matrix");
  if ((m0.format == WeightFormat::kQ8_0 || m0.format == WeightFormat::kQ4_0) && m0.cols % 32 != 0) {
    return make_error(ErrorCode::kShape, name + ": " + weight_format_name(m0.format) +
                                             " needs cols % 32 == 0, has " +
                                             std::to_string(m0.cols));
  }
  for (size_t e = 0; e < experts.size(); ++e) {
    const Matrix& m = experts[e];
    if (m.format != m0.format || m.rows != m0.rows || m.cols != m0.cols || m.data == nullptr) {
      return make_error(ErrorCode::kShape,
                        name + ": expert " + std::to_string(e) + " is " +
                            weight_format_name(m.format) + " [" + std::to_string(m.rows) + ", " +
                            std::to_string(m.cols) + "], expert 0 " +
                            weight_format_name(m0.format) + " [" + std::to_string(m0.rows) + ", " +
                            std::to_string(m0.cols) + "]");
    }
  }
  GpuExperts g;
  g.format = m0.format;
  g.experts = int64_t(experts.size());
  g.rows = m0.rows;
  g.cols = m0.cols;
  // Rows in the device layout (gpu/ops/matvec.h), expert e from row e · rows on.
  const VkDeviceSize each = VkDeviceSize(device_row_bytes(m0.format, m0.cols)) * VkDeviceSize(m0.rows);
  INFER_TRY(g.buffer,
            Buffer::create(ctx, each * experts.size(), BufferKind::kDevice, std::move(name)));
  for (size_t e = 0; e < experts.size(); ++e) {
    INFER_TRY_VOID(upload_rows(ctx, experts[e], g.buffer, each * e, pool));
  }
  return g;
}

Result<std::unique_ptr<MoeOps>> MoeOps::create(const VulkanContext& ctx, WeightFormat expert_format,
                                               uint32_t max_T, uint32_t max_k, uint32_t max_I,
                                               uint32_t max_E) {
  if (max_T == 0 || max_k == 0 || max_I == 0 || max_E == 0 || max_k > max_E) {
    return make_error(ErrorCode::kShape,
                      "moe: max T " + std::to_string(max_T) + ", k " + std::to_string(max_k) +
                          ", I " + std::to_string(max_I) + ", E " + std::to_string(max_E));
  }
  const DeviceInfo& info = ctx.info();
  std::unique_ptr<MoeOps> op(new MoeOps());
  op->p_ = std::make_unique<Pipelines>();
  Pipelines& p = *op->p_;
  p.max_T = max_T;
  p.max_k = max_k;
  p.max_I = max_I;
  p.max_E = max_E;
  p.format = expert_format;

  const ReduceShape shape = reduce_shape(info, default_subgroups_per_group(info));
  constexpr Access R = Access::kRead, W = Access::kWrite;
  auto reducing = [&](const std::string& variant, std::vector<Access> bindings,
                      std::unique_ptr<Pipeline>& out) -> Result<void> {
    PipelineDesc desc;
    desc.variant = variant;
    desc.bindings = std::move(bindings);
    desc.push_bytes = sizeof(shader::MoePush);
    desc.spec = {{INFER_MOE_SPEC_LOCAL_SIZE, shape.local_size},
                 {INFER_MOE_SPEC_ROWS, kRowsPerGroup},
                 {INFER_MOE_SPEC_MAX_SUBGROUPS, shape.max_subgroups}};
    desc.required_subgroup_size = shape.required_subgroup_size;
    INFER_TRY(out, Pipeline::create(ctx, desc));
    return Ok{};
  };
  // Bindings as the shaders' headers list them.
  INFER_TRY_VOID(reducing("moe_router_f32", {R, R, R, W}, p.router_f32));
  INFER_TRY_VOID(reducing("moe_router_bf16", {R, R, R, W}, p.router_bf16));
  const std::string fmt = weight_format_name(expert_format);
  INFER_TRY_VOID(reducing("moe_gate_up_" + fmt, {R, R, W, R}, p.gate_up));
  INFER_TRY_VOID(reducing("moe_down_" + fmt, {R, R, W, R, R}, p.down));

  PipelineDesc topk;
  topk.variant = "moe_topk";
  topk.bindings = {R, R, W, W};
  topk.push_bytes = sizeof(shader::MoePush);
  topk.spec = {
      {INFER_MOE_SPEC_LOCAL_SIZE, std::min(kTokensPerTopk, info.max_workgroup_invocations)},
      {INFER_MOE_SPEC_MAX_K, max_k}};
  INFER_TRY(p.topk, Pipeline::create(ctx, topk));

  INFER_TRY(p.logits, Buffer::create(ctx, VkDeviceSize(max_T) * max_E * 4, BufferKind::kDevice,
                                     "moe router logits"));
  INFER_TRY(p.act, Buffer::create(ctx, VkDeviceSize(max_T) * max_k * max_I * 4, BufferKind::kDevice,
                                  "moe expert act"));
  return op;
}

Result<void> MoeOps::route(Recorder& rec, const MoeDims& d, Binding x, Binding router_scale,
                           const GpuMatrix& router, Binding per_expert_scale, Binding idx,
                           Binding w) const {
  const Pipelines& p = *p_;
  INFER_CHECK(d.T > 0 && d.T <= p.max_T && d.E > 0 && d.E <= p.max_E && d.k > 0 && d.k <= p.max_k &&
                  d.k <= d.E && d.H > 0,
              "moe route: T %u, E %u, k %u, H %u; op made for T <= %u, E <= "
              "%u, k <= %u",
              d.T, d.E, d.k, d.H, p.max_T, p.max_E, p.max_k);
  INFER_CHECK(router.rows == d.E && router.cols == d.H &&
                  (router.format == WeightFormat::kF32 || router.format == WeightFormat::kBF16),
              "moe route: router \"%s\" is %s [%lld, %lld], wants f32/bf16 [%u, %u]",
              router.buffer.name().c_str(), weight_format_name(router.format),
              (long long)router.rows, (long long)router.cols, d.E, d.H);
  check_holds(x, uint64_t(d.T) * d.H * 4, "x");
  check_holds(router_scale, uint64_t(d.H) * 4, "router scale");
  check_holds(per_expert_scale, uint64_t(d.E) * 4, "per-expert scale");
  check_holds(idx, uint64_t(d.T) * d.k * 4, "idx");
  check_holds(w, uint64_t(d.T) * d.k * 4, "w");

  shader::MoePush push{};
  push.T = d.T;
  push.k = d.k;
  push.E = d.E;
  push.rows = d.E;
  push.cols = d.H;
  push.eps = d.eps;
  push.inv_sqrt_h = float(1.0 / std::sqrt(double(d.H)));  // as model/forward_moe.cpp rounds it
  const Pipeline& router_p = router.format == WeightFormat::kF32 ? *p.router_f32 : *p.router_bf16;
  INFER_TRY_VOID(rec.dispatch(router_p,
                              {Binding{&router.buffer}, x, router_scale, Binding{&p.logits}}, push,
                              Groups{div_up(d.E, kRowsPerGroup), d.T, 1}));
  return rec.dispatch(*p.topk, {Binding{&p.logits}, per_expert_scale, idx, w}, push,
                      Groups{div_up(d.T, kTokensPerTopk), 1, 1});
}

Result<void> MoeOps::experts(Recorder& rec, const MoeDims& d, Binding x2, const GpuExperts& gate_up,
                             const GpuExperts& down, Binding idx, Binding w, Binding out) const {
  const Pipelines& p = *p_;
  INFER_CHECK(d.T > 0 && d.T <= p.max_T && d.E > 0 && d.E <= p.max_E && d.k > 0 && d.k <= p.max_k &&
                  d.I > 0 && d.I <= p.max_I && d.H > 0,
              "moe experts: T %u, E %u, k %u, I %u, H %u; op made for T <= %u, "
              "E <= %u, k <= %u, "
              "I <= %u",
              d.T, d.E, d.k, d.I, d.H, p.max_T, p.max_E, p.max_k, p.max_I);
  INFER_CHECK(gate_up.format == p.format && down.format == p.format,
              "moe experts: %s / %s experts given to the %s op", weight_format_name(gate_up.format),
              weight_format_name(down.format), weight_format_name(p.format));
  INFER_CHECK(gate_up.experts == d.E && gate_up.rows == 2 * int64_t(d.I) && gate_up.cols == d.H,
              "moe experts: gate_up \"%s\" is %lld x [%lld, %lld], wants %u x [%u, %u]",
              gate_up.buffer.name().c_str(), (long long)gate_up.experts, (long long)gate_up.rows,
              (long long)gate_up.cols, d.E, 2 * d.I, d.H);
  INFER_CHECK(down.experts == d.E && down.rows == d.H && down.cols == d.I,
              "moe experts: down \"%s\" is %lld x [%lld, %lld], wants %u x [%u, %u]",
              down.buffer.name().c_str(), (long long)down.experts, (long long)down.rows,
              (long long)down.cols, d.E, d.H, d.I);
  check_holds(x2, uint64_t(d.T) * d.H * 4, "x2");
  check_holds(idx, uint64_t(d.T) * d.k * 4, "idx");
  check_holds(w, uint64_t(d.T) * d.k * 4, "w");
  check_holds(out, uint64_t(d.T) * d.H * 4, "out");

  shader::MoePush push{};
  push.T = d.T;
  push.k = d.k;
  push.E = d.E;
  push.eps = d.eps;
  push.inv_sqrt_h = 0.0f;  // unused by the expert shaders
  push.rows = d.I;
  push.cols = d.H;
  INFER_TRY_VOID(rec.dispatch(*p.gate_up, {Binding{&gate_up.buffer}, x2, Binding{&p.act}, idx},
                              push, Groups{div_up(d.I, kRowsPerGroup), d.T * d.k, 1}));
  push.rows = d.H;
  push.cols = d.I;
  return rec.dispatch(*p.down, {Binding{&down.buffer}, Binding{&p.act}, out, idx, w}, push,
                      Groups{div_up(d.H, kRowsPerGroup), d.T, 1});
}

}  // namespace infer::gpu
