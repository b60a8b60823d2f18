// The product with the stream step in its prologue: its pipelines (per format and kind, one per
// count of subgroup slots in use; the prologue's flags are push constants), the grid, and the
// choice of slots.
#include "gpu/ops/matvec_norm_in.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "base/check.h"
#include "gpu/context.h"
#include "gpu/ops/op_common.h"
#include "shaders/matvec_norm_in.h"

namespace infer::gpu {
namespace {

static_assert(sizeof(shader::MatvecNormInPush) == 9 * sizeof(uint32_t),
              "MatvecNormInPush must match shaders/matvec_norm_in.h (32-bit scalars only)");

// Defaults, each overridable from the environment (read once, at create()):
// - the grid bound: every workgroup stages the input itself (~16 bytes a column from the cache
//   and two reductions), so a grid of thousands (a 12B gate-up: 15360 rows) would read more
//   bytes from the cache than the weights from memory. 512 workgroups of ~128 invocations keep
//   ~15 subgroups on each of ~130 SMs: enough loads in flight to stream the weights.
constexpr uint32_t kDefaultMaxGroups = 512;
// - slots a subgroup takes to stay within it: each is another round of weight loads after the
//   last, so past 8 a head of 262144 rows would stream its weights slower than the separate
//   norm costs: it keeps the separate dispatch.
constexpr uint32_t kDefaultMaxSlots = 8;
// - the workgroup: ~128 invocations (matvec.cpp's reducing workgroups), more where the row is
//   longer than 16 columns an invocation (the shader's kQuadBatch quads): then every invocation
//   loads its whole share of the prologue's inputs at once, one round of cache latency.
constexpr uint32_t kColsPerInvocation = 16;

uint32_t env_or(const char* name, uint32_t value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::atoi(v) > 0 ? uint32_t(std::atoi(v)) : value;
}

// matvec.cpp's rows per subgroup: quantized rows 4 to a subgroup (2 for gate-up), else 2 (1).
uint32_t default_rows(WeightFormat f, bool gate_up) {
  const bool quantized = f == WeightFormat::kQ8_0 || f == WeightFormat::kQ4_0;
  if (gate_up) return quantized ? 2 : 1;
  return quantized ? 4 : 2;
}

// Quads of 4 columns the staged input needs for up to `cols` columns: rows pad to 256 columns at
// most (Q8_0/Q4_0 groups), and the product reads the padding.
uint32_t staged_quads(uint32_t cols) { return (cols + 255) / 256 * 64; }

bool aligned16(const Binding& b) { return b.offset % 16 == 0; }

}  // namespace

MatvecNormInOp::~MatvecNormInOp() = default;

Result<std::unique_ptr<MatvecNormInOp>> MatvecNormInOp::create(const VulkanContext& ctx,
                                                               WeightFormat format, bool gate_up,
                                                               uint32_t max_cols,
                                                               NormInTuning t) {
  const DeviceInfo& info = ctx.info();
  const uint32_t subgroup = std::max(1u, info.subgroup_size);
  if (t.subgroups == 0) {
    const uint32_t row = (max_cols + kColsPerInvocation * subgroup - 1) /
                         (kColsPerInvocation * subgroup);
    t.subgroups =
        env_or("INFER_NORM_IN_SUBGROUPS", std::max(default_subgroups_per_group(info), row));
  }
  t.subgroups = std::min(t.subgroups, std::max(1u, info.max_workgroup_invocations / subgroup));
  if (t.rows_per_subgroup == 0) t.rows_per_subgroup = default_rows(format, gate_up);
  if (t.max_groups == 0) t.max_groups = env_or("INFER_NORM_IN_GROUPS", kDefaultMaxGroups);
  if (t.max_slots == 0) t.max_slots = env_or("INFER_NORM_IN_SLOTS", kDefaultMaxSlots);
  t.max_slots = std::min(t.max_slots, 1u << kMaxSlotsLog2);
  t.prefetch = t.prefetch || env_or("INFER_NORM_IN_PREFETCH", 0) == 1;

  const ReduceShape shape = reduce_shape(info, t.subgroups);
  const uint32_t quads = staged_quads(std::max(1u, max_cols));
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(ctx.physical_device(), &props);
  const uint32_t bindings = gate_up ? INFER_NORM_IN_GATE_UP_BINDINGS : INFER_NORM_IN_BINDINGS;
  // The staged input, the reduction's partials, and (matvec_rows.glsl) a sum per subgroup slot,
  // row and matrix: fewer slots where the device has less shared memory.
  auto shared_bytes = [&](uint32_t slots) {
    return quads * 16 + shape.max_subgroups * 2 * 4 +
           t.subgroups * slots * t.rows_per_subgroup * 2 * 4;
  };
  const uint32_t max_shared = props.limits.maxComputeSharedMemorySize;
  while (t.max_slots > 1 && shared_bytes(t.max_slots) > max_shared) t.max_slots /= 2;
  if (props.limits.maxPerStageDescriptorStorageBuffers < bindings ||
      shared_bytes(t.max_slots) > max_shared) {
    return std::unique_ptr<MatvecNormInOp>();
  }

  std::unique_ptr<MatvecNormInOp> op(new MatvecNormInOp());
  op->ctx_ = &ctx;
  op->format_ = format;
  op->gate_up_ = gate_up;
  op->max_cols_ = max_cols;
  op->max_workgroups_x_ = info.max_workgroup_count[0];
  op->t_ = t;
  PipelineDesc& desc = op->desc_;
  desc.variant = std::string(gate_up ? "gate_up_norm_in_" : "matvec_norm_in_") +
                 weight_format_name(format);
  const Access R = Access::kRead, W = Access::kWrite;
  // x_out is bound to y where the flags write no stream: a write either way, so the recorder's
  // barriers follow what the shader may write.
  desc.bindings = {R, R, W, R, R, R, W, R};
  if (gate_up) desc.bindings.push_back(R);
  desc.push_bytes = sizeof(shader::MatvecNormInPush);
  desc.spec = {{INFER_NORM_IN_SPEC_LOCAL_SIZE, shape.local_size},
               {INFER_NORM_IN_SPEC_ROWS, t.rows_per_subgroup},
               {INFER_NORM_IN_SPEC_SUBGROUPS, t.subgroups},
               {INFER_NORM_IN_SPEC_MAX_SUBGROUPS, shape.max_subgroups},
               {INFER_NORM_IN_SPEC_QUADS, quads},
               {INFER_NORM_IN_SPEC_PREFETCH, t.prefetch ? 1u : 0u}};
  desc.required_subgroup_size = shape.required_subgroup_size;
  // One slot now: small matrices (the PLE gate) take it, and a device that cannot build the
  // shader says so here rather than at record time.
  INFER_TRY_VOID(op->pipeline_for(1));
  return op;
}

Result<const Pipeline*> MatvecNormInOp::pipeline_for(uint32_t slots) const {
  size_t k = 0;
  while ((1u << k) < slots) ++k;
  INFER_CHECK((1u << k) == slots && k <= kMaxSlotsLog2, "matvec_norm_in: %u slots", slots);
  std::lock_guard<std::mutex> lock(mutex_);
  if (pipelines_[k] == nullptr) {
    PipelineDesc desc = desc_;
    desc.spec.push_back({INFER_NORM_IN_SPEC_SLOTS, slots});
    INFER_TRY(pipelines_[k], Pipeline::create(*ctx_, desc));
  }
  return pipelines_[k].get();
}

uint32_t MatvecNormInOp::slots_for(int64_t rows) const {
  const uint64_t per_slot = uint64_t(t_.subgroups) * t_.rows_per_subgroup;
  for (uint32_t slots = 1; slots <= t_.max_slots; slots *= 2) {
    const uint64_t groups = (uint64_t(rows) + per_slot * slots - 1) / (per_slot * slots);
    if (groups <= t_.max_groups) return slots;
  }
  return 0;
}

bool MatvecNormInOp::applies(const GpuMatrix& w) const {
  return w.format == format_ && w.rows > 0 && w.cols > 0 && w.cols <= int64_t(max_cols_) &&
         slots_for(w.rows) > 0;
}

Result<void> MatvecNormInOp::record(Recorder& rec, const GpuMatrix& w, const GpuMatrix* up,
                                    const NormIn& ni, Binding y) const {
  const char* op = gate_up_ ? "gate_up_norm_in" : "matvec_norm_in";
  INFER_CHECK(applies(w), "%s: %s [%lld, %lld] (op: %s, cols <= %u)", op,
              weight_format_name(w.format), (long long)w.rows, (long long)w.cols,
              weight_format_name(format_), max_cols_);
  INFER_CHECK(w.buffer.size() >= device_row_bytes(w.format, w.cols) * size_t(w.rows),
              "%s: weights \"%s\" too small", op, w.buffer.name().c_str());
  INFER_CHECK((up != nullptr) == gate_up_, "%s: up matrix %s", op, up ? "given" : "missing");
  if (up != nullptr) {
    INFER_CHECK(up->format == w.format && up->rows == w.rows && up->cols == w.cols &&
                    up->buffer.size() >= w.buffer.size(),
                "%s: up \"%s\" differs from gate \"%s\"", op, up->buffer.name().c_str(),
                w.buffer.name().c_str());
  }
  const uint32_t rows = uint32_t(w.rows), cols = uint32_t(w.cols);
  const bool gelu = ni.gelu_b.buffer != nullptr;
  const bool add = ni.o.buffer != nullptr, norm = ni.norm_w.buffer != nullptr;
  INFER_CHECK(!gelu || (!add && !norm), "%s: a gated input with a residual step or norm", op);
  check_words(op, "x", ni.x, cols);
  check_words(op, "y", y, rows);

  shader::MatvecNormInPush push{};
  push.rows = rows;
  push.cols = cols;
  push.n_tokens = 1;
  push.x_stride = cols;
  push.y_stride = rows;
  push.eps = ni.eps;
  push.scale = ni.scale;
  // Bindings the flags leave unread get x (read) or, for x_out, y (written anyway).
  Binding o = ni.x, w_post = ni.x, norm_w = ni.x, x_out = y, b = ni.x;
  if (add) {
    check_words(op, "o", ni.o, cols);
    check_words(op, "w_post", ni.w_post, cols);
    check_words(op, "x_out", ni.x_out, cols);
    INFER_CHECK(ni.x_out.buffer != ni.x.buffer, "%s: x_out \"%s\" is x's buffer", op,
                ni.x.buffer->name().c_str());
    push.flags |= INFER_NORM_IN_ADD;
    o = ni.o;
    w_post = ni.w_post;
    x_out = ni.x_out;
  }
  if (norm) {
    check_words(op, "norm_w", ni.norm_w, cols);
    push.flags |= INFER_NORM_IN_NORM;
    norm_w = ni.norm_w;
  }
  if (gelu) {
    check_words(op, "b", ni.gelu_b, uint64_t(ni.b_off) + cols);
    push.flags |= INFER_NORM_IN_GELU;
    push.b_off = ni.b_off;
    b = ni.gelu_b;
  }
  // Whole quads where every [cols] binding starts 16-byte aligned (weight vectors need only the
  // device's offset alignment, which may be 4).
  if (cols % 4 == 0 && aligned16(ni.x) && aligned16(o) && aligned16(w_post) && aligned16(norm_w) &&
      aligned16(x_out)) {
    push.flags |= INFER_NORM_IN_VEC4;
  }
  const Binding* inputs[] = {&ni.x, &o, &w_post, &norm_w, &b};
  for (const Binding* in : inputs) {
    INFER_CHECK(in->buffer != y.buffer, "%s: y \"%s\" is also an input", op,
                y.buffer->name().c_str());
  }

  // Row groups along x up to the device limit, then z (matvec.comp's grid).
  const uint32_t slots = slots_for(w.rows);
  INFER_TRY(const Pipeline* pipeline, pipeline_for(slots));
  const uint32_t rows_per_group = t_.subgroups * slots * t_.rows_per_subgroup;
  const uint32_t row_groups = (rows + rows_per_group - 1) / rows_per_group;
  Groups g;
  g.x = std::min(row_groups, max_workgroups_x_);
  g.z = (row_groups + g.x - 1) / g.x;
  const Binding wb{&w.buffer};
  if (up != nullptr) {
    return rec.dispatch(*pipeline, {wb, ni.x, y, o, w_post, norm_w, x_out, b, Binding{&up->buffer}},
                        push, g);
  }
  return rec.dispatch(*pipeline, {wb, ni.x, y, o, w_post, norm_w, x_out, b}, push, g);
}

}  // namespace infer::gpu
