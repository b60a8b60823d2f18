// The fused product + residual step: its pipelines (matvec.comp's workgroup shape, one with the
// next norm and one without), the completion counter, and the choice between it and the
// separate dispatches.
#include "gpu/ops/matvec_add_norm.h"

#include <algorithm>
#include <string>

#include "base/check.h"
#include "gpu/context.h"
#include "gpu/ops/elementwise.h"
#include "gpu/ops/norm.h"
#include "gpu/ops/op_common.h"
#include "shaders/matvec_add_norm.h"

namespace infer::gpu {
namespace {

static_assert(sizeof(shader::MatvecAddNormPush) == 10 * sizeof(uint32_t),
              "MatvecAddNormPush must match shaders/matvec_add_norm.h (32-bit scalars only)");

}  // namespace

MatvecAddNormOp::~MatvecAddNormOp() = default;

Result<std::unique_ptr<MatvecAddNormOp>> MatvecAddNormOp::create(const VulkanContext& ctx,
                                                                 const MatvecKernels& k) {
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(ctx.physical_device(), &props);
  if (props.limits.maxPerStageDescriptorStorageBuffers < INFER_MATVEC_ADD_NORM_NEXT_BINDINGS ||
      k.gate_up) {
    return std::unique_ptr<MatvecAddNormOp>();
  }
  std::unique_ptr<MatvecAddNormOp> op(new MatvecAddNormOp());
  op->k_ = &k;
  const MatvecTuning& t = k.tuning;
  const ReduceShape shape = reduce_shape(ctx.info(), t.subgroups_per_group);
  const Access R = Access::kRead, W = Access::kWrite, RW = Access::kReadWrite;
  for (bool next : {false, true}) {
    PipelineDesc desc;
    desc.variant = std::string(next ? "matvec_add_norm_next_" : "matvec_add_norm_") +
                   weight_format_name(k.format);
    desc.bindings = {R, R, RW, R, RW, R, RW};
    if (next) desc.bindings.insert(desc.bindings.end(), {R, W});
    desc.push_bytes = sizeof(shader::MatvecAddNormPush);
    // The product exactly as matvec.comp's one-token pipeline runs it.
    desc.spec = {{INFER_MATVEC_ADD_NORM_SPEC_LOCAL_SIZE, shape.local_size},
                 {INFER_MATVEC_ADD_NORM_SPEC_ROWS, t.rows_per_subgroup},
                 {INFER_MATVEC_ADD_NORM_SPEC_TOKENS, 1},
                 {INFER_MATVEC_ADD_NORM_SPEC_SUBGROUPS, t.subgroups_per_group},
                 {INFER_MATVEC_ADD_NORM_SPEC_MAX_SUBGROUPS, shape.max_subgroups}};
    desc.required_subgroup_size = shape.required_subgroup_size;
    INFER_TRY(std::unique_ptr<Pipeline> p, Pipeline::create(ctx, desc));
    (next ? op->next_ : op->plain_) = std::move(p);
  }
  INFER_TRY(op->counter_,
            Buffer::create(ctx, 16, BufferKind::kDevice, "matvec_add_norm counter"));
  const uint32_t zeros[4] = {};
  INFER_TRY_VOID(upload(ctx, op->counter_, 0, zeros, sizeof(zeros)));
  return op;
}

bool MatvecAddNormOp::applies(const GpuMatrix& w, uint32_t n_tokens) const {
  return n_tokens == 1 && w.format == k_->format &&
         runs_matvec_shader(*k_, w.rows, w.cols, n_tokens);
}

Result<void> MatvecAddNormOp::record(Recorder& rec, const GpuMatrix& w, Binding x,
                                     const GeluMulInput* gelu, Binding o, const AddNormArgs& an,
                                     uint32_t n_tokens) const {
  INFER_CHECK(applies(w, n_tokens), "matvec_add_norm: %s [%lld, %lld] over %u tokens",
              weight_format_name(w.format), (long long)w.rows, (long long)w.cols, n_tokens);
  INFER_CHECK(w.buffer.size() >= device_row_bytes(w.format, w.cols) * size_t(w.rows),
              "matvec_add_norm: weights \"%s\" too small", w.buffer.name().c_str());
  const uint32_t H = uint32_t(w.rows), cols = uint32_t(w.cols), T = n_tokens;
  check_words("matvec_add_norm", "x", x, uint64_t(T) * cols);
  check_words("matvec_add_norm", "o", o, uint64_t(T) * H);
  check_words("matvec_add_norm", "stream", an.x, uint64_t(T) * H);
  check_words("matvec_add_norm", "w_post", an.w_post, H);
  // o is written while the others are read (the stream by the last workgroup only).
  INFER_CHECK(o.buffer != x.buffer && o.buffer != an.x.buffer &&
                  (gelu == nullptr || o.buffer != gelu->b.buffer),
              "matvec_add_norm: o \"%s\" shares a buffer with an input", o.buffer->name().c_str());
  shader::MatvecAddNormPush push{};
  push.rows = H;
  push.cols = cols;
  push.n_tokens = T;
  push.x_stride = cols;
  push.y_stride = H;
  push.eps = an.eps;
  push.scale = an.scale;
  Binding b = x;  // read only with gelu_b
  if (gelu != nullptr) {
    check_words("matvec_add_norm", "b", gelu->b,
                uint64_t(T - 1) * gelu->b_stride + gelu->b_off + cols);
    push.gelu_b = 1;
    push.b_stride = gelu->b_stride;
    push.b_off = gelu->b_off;
    b = gelu->b;
  }

  // matvec.comp's one-token grid: row groups along x up to the device limit, then z.
  const MatvecTuning& t = k_->tuning;
  const uint32_t rows_per_group = t.subgroups_per_group * t.rows_per_subgroup;
  const uint32_t row_groups = (H + rows_per_group - 1) / rows_per_group;
  Groups g;
  g.x = std::min(row_groups, k_->max_workgroups_x);
  g.z = (row_groups + g.x - 1) / g.x;
  const Binding counter{&counter_};
  if (an.next_w.buffer == nullptr) {
    return rec.dispatch(*plain_, {Binding{&w.buffer}, x, o, b, an.x, an.w_post, counter}, push,
                        g);
  }
  check_words("matvec_add_norm", "next_w", an.next_w, H);
  check_words("matvec_add_norm", "h", an.h, uint64_t(T) * H);
  return rec.dispatch(*next_, {Binding{&w.buffer}, x, o, b, an.x, an.w_post, counter, an.next_w,
                               an.h},
                      push, g);
}

Result<void> record_matvec_add_norm(Recorder& rec, const MatvecOp& mv, const NormOps& norm,
                                    const ElementwiseOps& elementwise, const GpuMatrix& w,
                                    Binding x, const GeluMulInput* gelu, Binding o,
                                    const AddNormArgs& an, uint32_t n_tokens) {
  const MatvecAddNormOp* fused = mv.add_norm_op();
  if (fused != nullptr && fused->applies(w, n_tokens)) {
    return fused->record(rec, w, x, gelu, o, an, n_tokens);
  }
  const uint32_t cols = uint32_t(w.cols);
  if (gelu != nullptr) {
    INFER_TRY_VOID(elementwise.gelu_mul(rec, x, cols, 0, gelu->b, gelu->b_stride, gelu->b_off, x,
                                        n_tokens, cols));
  }
  INFER_TRY_VOID(mv.record(rec, w, x, o, n_tokens));
  return norm.add_norm(rec, an.x, o, an.w_post, an.scale, an.next_w, an.h, n_tokens,
                       uint32_t(w.rows), an.eps);
}

}  // namespace infer::gpu
