// RMSNorm family: pipelines sized from the device (all built in create()), and record().
#include "gpu/ops/rms_norm.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <vector>

#include "base/check.h"
#include "gpu/context.h"
#include "gpu/ops/op_common.h"
#include "shaders/rms_norm.h"

namespace infer::gpu {
namespace {

static_assert(sizeof(shader::NormPush) == 4 * sizeof(uint32_t),
              "NormPush must match shaders/rms_norm.h in the shader (32-bit scalars only)");

// A whole row (H up to 5376) in one workgroup: enough loads in flight on a big GPU with ~10 floats
// an invocation, and a reduction of only a few subgroups.
constexpr uint32_t kRowInvocations = 512;
// Rows this short (head dims, PLE slices of P = 256) go to one-subgroup workgroups: a 512-wide
// one would leave most invocations idle, and there are many such rows (T·L, T·n_q).
constexpr uint32_t kShortRowPerInvocation = 8;
// add_norm's registers variants: elements an invocation holds at most; rows longer than the
// workgroup times this take the loop form. Holding the row in registers (one read of x and o) beat
// the loop form side by side on the H200: E2B Q4_0 319.5 / 320.5 vs 310.8 / 306.8 t/s, 12B Q4_0
// 177.1 vs 173.6, 12B bf16 119.4 vs 117.1 / 117.9.
constexpr uint32_t kMaxPerInvocation = 16;
// add_norm.comp's shared memory besides INT8_OUT's row: the reduction's partials (and headroom).
constexpr size_t kReduceSharedBytes = 1024;

// per_invocation > 0: add_norm.comp's registers variants, holding that many elements an invocation.
Result<std::unique_ptr<Pipeline>> make(const VulkanContext& ctx, const char* variant,
                                       std::vector<Access> bindings, WorkgroupSize s,
                                       uint32_t per_invocation = 0) {
  PipelineDesc desc;
  desc.variant = variant;
  desc.bindings = std::move(bindings);
  desc.push_bytes = sizeof(shader::NormPush);
  desc.spec = {{INFER_NORM_SPEC_LOCAL_SIZE, s.local},
               {INFER_NORM_SPEC_MAX_SUBGROUPS, s.max_subgroups}};
  if (per_invocation > 0) desc.spec.push_back({INFER_NORM_SPEC_PER_INVOCATION, per_invocation});
  return Pipeline::create(ctx, desc);
}

}  // namespace

struct RmsNormOps::Pipelines {
  const VulkanContext* ctx = nullptr;
  uint32_t short_row_max = 0;  // n up to this goes to the one-subgroup rms_norm pipelines
  std::unique_ptr<Pipeline> rms_norm, rms_norm_short, rms_norm_no_weight, rms_norm_no_weight_short,
      add_norm, add_norm_next, norm_sum;
  // The registers add_norm variants and the longest row they take.
  std::unique_ptr<Pipeline> add_norm_registers, add_norm_next_registers;
  std::unique_ptr<Pipeline> add_norm_next_registers_int8;  // null where the row's copy does not fit
  uint32_t registers_max_row = 0;

  Groups rows_grid(uint32_t rows) const { return wrapped_groups(ctx->info(), rows); }
};

RmsNormOps::~RmsNormOps() = default;

Result<std::unique_ptr<RmsNormOps>> RmsNormOps::create(const VulkanContext& ctx, uint32_t row_n,
                                                 bool int8_h) {
  std::unique_ptr<RmsNormOps> op(new RmsNormOps());
  op->p_ = std::make_unique<Pipelines>();
  Pipelines& p = *op->p_;
  p.ctx = &ctx;
  const uint32_t sub = std::max(1u, ctx.info().subgroup_size);
  const uint32_t row_target =
      row_n == 0 ? kRowInvocations : std::min(kRowInvocations, (row_n + sub - 1) / sub * sub);
  const WorkgroupSize row = workgroup_size(ctx.info(), row_target);
  const WorkgroupSize one = workgroup_size(ctx.info(), ctx.info().subgroup_size);
  p.short_row_max = one.local * kShortRowPerInvocation;
  const Access R = Access::kRead, W = Access::kWrite;
  INFER_TRY(p.rms_norm, make(ctx, "rms_norm", {R, R, W}, row));
  INFER_TRY(p.rms_norm_short, make(ctx, "rms_norm", {R, R, W}, one));
  INFER_TRY(p.rms_norm_no_weight, make(ctx, "rms_norm_no_weight", {R, W}, row));
  INFER_TRY(p.rms_norm_no_weight_short, make(ctx, "rms_norm_no_weight", {R, W}, one));
  INFER_TRY(p.add_norm, make(ctx, "add_norm", {Access::kReadWrite, R, R}, row));
  INFER_TRY(p.add_norm_next, make(ctx, "add_norm_next", {Access::kReadWrite, R, R, R, W}, row));
  INFER_TRY(p.norm_sum, make(ctx, "norm_sum", {R, R, R, R, W}, row));
  // As many elements an invocation as the model's rows need (all of kMaxPerInvocation when
  // unknown).
  const uint32_t per_invocation =
      row_n == 0 ? kMaxPerInvocation
                 : std::clamp((row_n + row.local - 1) / row.local, 1u, kMaxPerInvocation);
  p.registers_max_row = per_invocation * row.local;
  INFER_TRY(p.add_norm_registers,
            make(ctx, "add_norm_registers", {Access::kReadWrite, R, R}, row, per_invocation));
  INFER_TRY(p.add_norm_next_registers, make(ctx, "add_norm_next_registers",
                                            {Access::kReadWrite, R, R, R, W}, row, per_invocation));
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(ctx.physical_device(), &props);
  if (int8_h && size_t(p.registers_max_row) * 4 + kReduceSharedBytes <=
                    props.limits.maxComputeSharedMemorySize) {
    INFER_TRY(p.add_norm_next_registers_int8,
              make(ctx, "add_norm_next_registers_int8", {Access::kReadWrite, R, R, R, W, W}, row,
                   per_invocation));
  }
  return op;
}

Result<void> RmsNormOps::rms_norm(Recorder& rec, Binding x, Binding w, Binding out, uint32_t rows,
                               uint32_t n, float eps) const {
  INFER_CHECK(rows > 0 && n > 0, "rms_norm: %u rows of %u", rows, n);
  check_words("rms_norm", "x", x, uint64_t(rows) * n);
  check_words("rms_norm", "out", out, uint64_t(rows) * n);
  const shader::NormPush push{rows, n, eps, 1.0f};
  const bool short_row = n <= p_->short_row_max;
  const Groups g = p_->rows_grid(rows);
  if (w.buffer == nullptr) {
    return rec.dispatch(short_row ? *p_->rms_norm_no_weight_short : *p_->rms_norm_no_weight,
                        {x, out}, push, g);
  }
  check_words("rms_norm", "w", w, n);
  return rec.dispatch(short_row ? *p_->rms_norm_short : *p_->rms_norm, {x, w, out}, push, g);
}

Result<void> RmsNormOps::add_norm(Recorder& rec, Binding x, Binding o, Binding w_post, float scale,
                               Binding next_w, Binding h, uint32_t T, uint32_t n, float eps,
                               Binding h_int8) const {
  INFER_CHECK(T > 0 && n > 0, "add_norm: %u rows of %u", T, n);
  check_words("add_norm", "x", x, uint64_t(T) * n);
  check_words("add_norm", "o", o, uint64_t(T) * n);
  check_words("add_norm", "w_post", w_post, n);
  const shader::NormPush push{T, n, eps, scale};
  const Groups g = p_->rows_grid(T);
  const bool in_registers = n <= p_->registers_max_row;
  if (next_w.buffer == nullptr) {
    return rec.dispatch(in_registers ? *p_->add_norm_registers : *p_->add_norm, {x, o, w_post},
                        push, g);
  }
  check_words("add_norm", "next_w", next_w, n);
  check_words("add_norm", "h", h, uint64_t(T) * n);
  if (h_int8.buffer != nullptr) {
    INFER_CHECK(writes_int8_h(n), "add_norm: no int8 copy of h for rows of %u", n);
    const uint64_t bytes = int8_x_bytes(T, n);
    INFER_CHECK(h_int8.buffer->size() >= h_int8.offset + bytes,
                "add_norm: h_int8 \"%s\" holds under %llu bytes", h_int8.buffer->name().c_str(),
                (unsigned long long)bytes);
    return rec.dispatch(*p_->add_norm_next_registers_int8, {x, o, w_post, next_w, h, h_int8}, push,
                        g);
  }
  return rec.dispatch(in_registers ? *p_->add_norm_next_registers : *p_->add_norm_next,
                      {x, o, w_post, next_w, h}, push, g);
}

bool RmsNormOps::writes_int8_h(uint32_t n) const {
  return p_->add_norm_next_registers_int8 != nullptr && n <= p_->registers_max_row && n % 32 == 0;
}

Result<void> RmsNormOps::norm_sum(Recorder& rec, Binding a, Binding wa, Binding b, Binding wb,
                               Binding out, uint32_t T, uint32_t n, float eps) const {
  INFER_CHECK(T > 0 && n > 0, "norm_sum: %u rows of %u", T, n);
  check_words("norm_sum", "a", a, uint64_t(T) * n);
  check_words("norm_sum", "wa", wa, n);
  check_words("norm_sum", "b", b, uint64_t(T) * n);
  check_words("norm_sum", "wb", wb, n);
  check_words("norm_sum", "out", out, uint64_t(T) * n);
  const shader::NormPush push{T, n, eps, 1.0f};
  return rec.dispatch(*p_->norm_sum, {a, wa, b, wb, out}, push, p_->rows_grid(T));
}

}  // namespace infer::gpu
