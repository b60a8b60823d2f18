// Matrix-vector op: pipeline variants per weight format, sized from the device, and record().
#include "gpu/ops/matvec.h"

#include <algorithm>
#include <string>

#include "base/check.h"
#include "gpu/context.h"
#include "shaders/matvec.h"

namespace infer::gpu {
namespace {

static_assert(sizeof(shader::MatvecPush) == 5 * sizeof(uint32_t),
              "MatvecPush must match shaders/matvec.h in the shader (32-bit scalars only)");

// Invocations a workgroup aims for: enough columns in flight per row on every GPU we know of
// (32-wide NVIDIA/Intel, 64-wide AMD), and a modest count on CPU drivers.
constexpr uint32_t kTargetInvocations = 128;
constexpr uint32_t kDefaultRows = 2;
constexpr uint32_t kDefaultTokens = 4;

// shaders/meson.build names the variants "matvec_" + the format's name ("matvec_q4_0").
std::string variant_name(WeightFormat f) { return std::string("matvec_") + weight_format_name(f); }

}  // namespace

Result<GpuMatrix> upload_matrix(const VulkanContext& ctx, const Matrix& m, std::string name) {
  if (m.rows <= 0 || m.cols <= 0 || m.data == nullptr) {
    return make_error(ErrorCode::kShape, name + ": empty matrix");
  }
  if ((m.format == WeightFormat::kQ8_0 || m.format == WeightFormat::kQ4_0) && m.cols % 32 != 0) {
    return make_error(ErrorCode::kShape, name + ": " + weight_format_name(m.format) + " needs " +
                                             "cols % 32 == 0, has " + std::to_string(m.cols));
  }
  GpuMatrix g;
  g.format = m.format;
  g.rows = m.rows;
  g.cols = m.cols;
  // Whole 4-byte words: the bf16 shader reads 32-bit words of even rows.
  const VkDeviceSize bytes = (VkDeviceSize(m.nbytes()) + 3) & ~VkDeviceSize(3);
  INFER_TRY(g.buffer, Buffer::create(ctx, bytes, BufferKind::kDevice, std::move(name)));
  INFER_TRY_VOID(upload(ctx, g.buffer, 0, m.data, m.nbytes()));
  return g;
}

Result<std::unique_ptr<MatvecOp>> MatvecOp::create(const VulkanContext& ctx, WeightFormat format,
                                                   MatvecTuning tuning) {
  const DeviceInfo& info = ctx.info();
  std::unique_ptr<MatvecOp> op(new MatvecOp());
  op->ctx_ = &ctx;
  op->format_ = format;

  const uint32_t subgroup = std::max(1u, info.subgroup_size);
  if (tuning.subgroups_per_group == 0) {
    tuning.subgroups_per_group = std::max(1u, kTargetInvocations / subgroup);
  }
  tuning.subgroups_per_group =
      std::min(tuning.subgroups_per_group, std::max(1u, info.max_workgroup_invocations / subgroup));
  if (tuning.rows_per_group == 0) tuning.rows_per_group = kDefaultRows;
  if (tuning.tokens_per_group == 0) tuning.tokens_per_group = kDefaultTokens;
  op->tuning_ = tuning;

  const uint32_t local_size = subgroup * tuning.subgroups_per_group;
  // With the subgroup size pinned there are exactly local_size / subgroup subgroups; otherwise
  // the driver may pick any size down to the minimum.
  const bool pin = info.compute_required_subgroup_size && info.compute_full_subgroups &&
                   subgroup >= info.min_subgroup_size && subgroup <= info.max_subgroup_size;
  const uint32_t max_subgroups =
      pin ? tuning.subgroups_per_group : std::max(1u, local_size / info.min_subgroup_size);

  for (uint32_t tokens : {1u, tuning.tokens_per_group}) {
    PipelineDesc desc;
    desc.variant = variant_name(format);
    desc.bindings = {Access::kRead, Access::kRead, Access::kWrite};
    desc.push_bytes = sizeof(shader::MatvecPush);
    desc.spec = {{INFER_MATVEC_SPEC_LOCAL_SIZE, local_size},
                 {INFER_MATVEC_SPEC_ROWS, tuning.rows_per_group},
                 {INFER_MATVEC_SPEC_TOKENS, tokens},
                 {INFER_MATVEC_SPEC_MAX_SUBGROUPS, max_subgroups}};
    desc.required_subgroup_size = pin ? subgroup : 0;
    INFER_TRY(std::unique_ptr<Pipeline> p, Pipeline::create(ctx, desc));
    (tokens == 1 ? op->one_token_ : op->many_tokens_) = std::move(p);
  }
  return op;
}

Result<void> MatvecOp::record(Recorder& rec, const GpuMatrix& w, Binding x, Binding y,
                              uint32_t n_tokens) const {
  INFER_CHECK(w.format == format_, "matvec: %s weights given to the %s op",
              weight_format_name(w.format), weight_format_name(format_));
  INFER_CHECK(n_tokens > 0, "matvec: no tokens");
  INFER_CHECK(w.buffer.size() >= row_bytes(w.format, w.cols) * size_t(w.rows),
              "matvec: weights \"%s\" too small", w.buffer.name().c_str());
  INFER_CHECK(x.buffer->size() - x.offset >= VkDeviceSize(n_tokens) * VkDeviceSize(w.cols) * 4,
              "matvec: x \"%s\" holds fewer than %u x %lld floats", x.buffer->name().c_str(),
              n_tokens, (long long)w.cols);
  INFER_CHECK(y.buffer->size() - y.offset >= VkDeviceSize(n_tokens) * VkDeviceSize(w.rows) * 4,
              "matvec: y \"%s\" holds fewer than %u x %lld floats", y.buffer->name().c_str(),
              n_tokens, (long long)w.rows);
  const Pipeline& p = n_tokens == 1 ? *one_token_ : *many_tokens_;
  const uint32_t tokens = n_tokens == 1 ? 1 : tuning_.tokens_per_group;

  shader::MatvecPush push{};
  push.rows = uint32_t(w.rows);
  push.cols = uint32_t(w.cols);
  push.n_tokens = n_tokens;
  push.x_stride = uint32_t(w.cols);
  push.y_stride = uint32_t(w.rows);

  // Row groups fill x up to the device limit, then wrap into z (262144-row vocab heads).
  const uint32_t row_groups =
      uint32_t((w.rows + tuning_.rows_per_group - 1) / tuning_.rows_per_group);
  Groups g;
  g.x = std::min(row_groups, ctx_->info().max_workgroup_count[0]);
  g.z = (row_groups + g.x - 1) / g.x;
  g.y = (n_tokens + tokens - 1) / tokens;
  return rec.dispatch(p, {Binding{&w.buffer}, x, y}, push, g);
}

Result<void> run_matvec(const VulkanContext& ctx, const MatvecOp& op, const GpuMatrix& w,
                        const float* x, int64_t n_tokens, float* y) {
  const size_t x_bytes = size_t(n_tokens * w.cols) * sizeof(float);
  const size_t y_bytes = size_t(n_tokens * w.rows) * sizeof(float);
  INFER_TRY(Buffer xb, Buffer::create(ctx, x_bytes, BufferKind::kDevice, "matvec x"));
  INFER_TRY(Buffer yb, Buffer::create(ctx, y_bytes, BufferKind::kDevice, "matvec y"));
  INFER_TRY_VOID(upload(ctx, xb, 0, x, x_bytes));
  INFER_TRY(std::unique_ptr<Recorder> rec, Recorder::create(ctx));
  INFER_TRY_VOID(rec->begin());
  INFER_TRY_VOID(op.record(*rec, w, Binding{&xb}, Binding{&yb}, uint32_t(n_tokens)));
  INFER_TRY_VOID(rec->submit_and_wait());
  return download(ctx, yb, 0, y, y_bytes);
}

}  // namespace infer::gpu
