// Matrix-vector and tiled matrix-matrix ops: pipeline variants per weight format, sized from the
// device, and the choice between them by T. The weights' device layout is gpu/ops/weight_layout.cpp.
#include "gpu/ops/matvec.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/check.h"
#include "gpu/context.h"
#include "gpu/ops/matmul_coop.h"
#include "gpu/ops/matmul_tuning.h"
#include "gpu/ops/matvec_dot.h"
#include "gpu/ops/matvec_shape.h"
#include "gpu/ops/op_common.h"
#include "shaders/matvec.h"

namespace infer::gpu {
namespace {

static_assert(sizeof(shader::MatvecPush) == 6 * sizeof(uint32_t),
              "MatvecPush must match shaders/matvec.h in the shader (32-bit "
              "scalars only)");

// Invocations a reducing workgroup (reduce_shape users) aims for: enough columns in flight per
// row on every GPU we know of (32-wide NVIDIA/Intel, 64-wide AMD), and a modest count on CPU
// drivers.
constexpr uint32_t kTargetInvocations = 128;
// shaders/meson.build names the variants family + "_" + the format's name ("matmul_q4_0").
std::string variant_name(const char* family, WeightFormat f) {
  return std::string(family) + "_" + weight_format_name(f);
}

// Whether the integer-dot-product kernels run: asked for (the forward asks per model,
// gpu/tuning.h's int_dot) and the format has them.
Result<bool> want_int_dot(const DeviceInfo& info, WeightFormat format, IntDot mode) {
  const bool quantized = format == WeightFormat::kQ8_0 || format == WeightFormat::kQ4_0;
  if (mode == IntDot::kOff || !quantized) return false;
  if (!info.integer_dot_product) {
    return make_error(ErrorCode::kUnsupported,
                      info.name + " lacks shaderIntegerDotProduct (integer-dot matvec asked for)");
  }
  return true;
}

}  // namespace

ReduceShape reduce_shape(const DeviceInfo& info, uint32_t subgroups_per_group) {
  const uint32_t subgroup = std::max(1u, info.subgroup_size);
  ReduceShape s;
  s.local_size = subgroup * subgroups_per_group;
  // With the subgroup size pinned there are exactly local_size / subgroup subgroups; otherwise the
  // driver may pick any size down to the minimum.
  const bool pin = info.compute_required_subgroup_size && info.compute_full_subgroups &&
                   subgroup >= info.min_subgroup_size && subgroup <= info.max_subgroup_size;
  s.max_subgroups =
      pin ? subgroups_per_group : std::max(1u, s.local_size / std::max(1u, info.min_subgroup_size));
  s.required_subgroup_size = pin ? subgroup : 0;
  return s;
}

uint32_t default_subgroups_per_group(const DeviceInfo& info) {
  const uint32_t subgroup = std::max(1u, info.subgroup_size);
  return std::min(std::max(1u, kTargetInvocations / subgroup),
                  std::max(1u, info.max_workgroup_invocations / subgroup));
}

Result<MatvecKernels> create_matvec_kernels(const VulkanContext& ctx, WeightFormat format,
                                            bool gate_up, MatvecTuning tuning) {
  const DeviceInfo& info = ctx.info();
  MatvecKernels k;
  k.format = format;
  k.gate_up = gate_up;
  k.max_workgroups_x = info.max_workgroup_count[0];

  const uint32_t subgroup = std::max(1u, info.subgroup_size);
  k.subgroup_size = subgroup;
  resolve_matvec_shape(info, ctx.tuning(), format, gate_up, tuning);
  INFER_TRY_VOID(resolve_matmul_tuning(ctx, gate_up, tuning));
  k.tuning = tuning;

  const ReduceShape shape = reduce_shape(info, tuning.subgroups_per_group);
  const uint32_t bindings = gate_up ? 4 : 3;

  for (uint32_t tokens : {1u, tuning.tokens_per_group}) {
    PipelineDesc desc;
    desc.variant = variant_name(gate_up ? "gate_up" : "matvec", format);
    desc.bindings = {Access::kRead, Access::kRead, Access::kWrite, Access::kRead};
    desc.bindings.resize(bindings);
    desc.push_bytes = sizeof(shader::MatvecPush);
    desc.spec = {{INFER_MATVEC_SPEC_LOCAL_SIZE, shape.local_size},
                 {INFER_MATVEC_SPEC_ROWS, tuning.rows_per_subgroup},
                 {INFER_MATVEC_SPEC_TOKENS, tokens},
                 {INFER_MATVEC_SPEC_SUBGROUPS, tuning.subgroups_per_group},
                 {INFER_MATVEC_SPEC_UNROLL, tuning.vec_unroll}};
    desc.required_subgroup_size = shape.required_subgroup_size;
    INFER_TRY(std::unique_ptr<Pipeline> p, Pipeline::create(ctx, desc));
    (tokens == 1 ? k.one_token : k.many_tokens) = std::move(p);
    if (tokens == 1 && tuning.max_split == 1) {  // variants for unsplit kernels only
      std::vector<uint32_t> rows = {tuning.rows_per_subgroup};
      for (uint32_t r = tuning.rows_per_subgroup / 2; tuning.min_grid_subgroups > 0 && r >= 1;
           r /= 2) {
        rows.push_back(r);
      }
      std::vector<uint32_t> unrolls = {tuning.vec_unroll};
      if (tuning.vec_unroll > 1) unrolls.push_back(1);
      for (uint32_t r : rows) {
        for (uint32_t u : unrolls) {
          if (r == tuning.rows_per_subgroup && u == tuning.vec_unroll) continue;  // one_token
          PipelineDesc variant = desc;
          for (SpecConstant& c : variant.spec) {
            if (c.id == INFER_MATVEC_SPEC_ROWS) c.value = r;
            if (c.id == INFER_MATVEC_SPEC_UNROLL) c.value = u;
          }
          INFER_TRY(std::unique_ptr<Pipeline> v, Pipeline::create(ctx, variant));
          k.one_token_variants.push_back({r, u, std::move(v)});
        }
      }
    }
  }

  PipelineDesc desc;
  desc.variant = variant_name(gate_up ? "gate_up_matmul" : "matmul", format);
  desc.bindings = {Access::kRead, Access::kRead, Access::kWrite, Access::kRead};
  desc.bindings.resize(bindings);
  desc.push_bytes = sizeof(shader::MatvecPush);
  const TileShape big{tuning.tile_rows, tuning.tile_tokens, tuning.thread_rows,
                      tuning.thread_tokens, tuning.tile_stages};
  const TileShape small = small_tile(tuning);
  const bool has_small = small.rows != big.rows || small.tokens != big.tokens;
  for (int i = 0; i < (has_small ? 2 : 1); ++i) {
    const TileShape& s = i == 0 ? big : small;
    const uint32_t invocations = (s.rows / s.thread_rows) * (s.tokens / s.thread_tokens);
    desc.spec = {{INFER_MATMUL_SPEC_LOCAL_SIZE, invocations},
                 {INFER_MATMUL_SPEC_TILE_ROWS, s.rows},
                 {INFER_MATMUL_SPEC_TILE_TOKENS, s.tokens},
                 {INFER_MATMUL_SPEC_THREAD_ROWS, s.thread_rows},
                 {INFER_MATMUL_SPEC_THREAD_TOKENS, s.thread_tokens},
                 {INFER_MATMUL_SPEC_STAGES, s.stages}};
    INFER_TRY(std::unique_ptr<Pipeline> p, Pipeline::create(ctx, desc));
    (i == 0 ? k.tiled : k.tiled_small) = std::move(p);
  }
  k.small_tile_rows = has_small ? small.rows : big.rows;
  k.small_tile_tokens = has_small ? small.tokens : big.tokens;

  INFER_TRY(const bool dot, want_int_dot(info, format, tuning.int_dot));
  INFER_TRY_VOID(create_coop_kernels(ctx, format, gate_up, k));
  tuning = k.tuning;  // with the coop tile resolved

  if (dot) INFER_TRY_VOID(create_dot_kernels(ctx, desc.bindings, tuning, k));
  return k;
}

namespace {

uint64_t tile_groups(int64_t rows, uint32_t n_tokens, uint32_t tile_rows, uint32_t tile_tokens) {
  return uint64_t((rows + tile_rows - 1) / tile_rows) *
         ((n_tokens + tile_tokens - 1) / tile_tokens);
}

// Counted in quarter tiles: the kernel a short grid of big tiles would take.
bool tiled_path(const MatvecKernels& k, int64_t rows, uint32_t n_tokens) {
  const MatvecTuning& t = k.tuning;
  return n_tokens >= t.matmul_min_tokens &&
         (n_tokens >= k.small_tile_tokens ||
          tile_groups(rows, n_tokens, k.small_tile_rows, k.small_tile_tokens) >=
              t.matmul_min_groups);
}

// Whether a tiled product takes the quarter tile: its big-tile grid is short of tile_min_groups.
bool small_tile_path(const MatvecKernels& k, int64_t rows, uint32_t n_tokens) {
  const MatvecTuning& t = k.tuning;
  return k.tiled_small != nullptr &&
         tile_groups(rows, n_tokens, t.tile_rows, t.tile_tokens) < t.tile_min_groups;
}

// The cooperative-matrix kernel takes rows of whole steps (INFER_MATMUL_COOP_COLS; others take
// the f32 tiled kernel) where the tiled kernel would run.
bool coop_path(const MatvecKernels& k, int64_t rows, int64_t cols, uint32_t n_tokens) {
  return k.coop != nullptr && cols % INFER_MATMUL_COOP_COLS == 0 && tiled_path(k, rows, n_tokens);
}

// The integer-dot kernel takes what would run on matvec.comp.
bool dot_path(const MatvecKernels& k, int64_t rows, int64_t cols, uint32_t n_tokens) {
  (void)cols;
  if (tiled_path(k, rows, n_tokens)) return false;
  return n_tokens == 1 ? k.dot_one_token != nullptr : k.dot_many_tokens != nullptr;
}

}  // namespace

size_t scratch_bytes(const MatvecKernels& k) {
  size_t bytes = 0;
  for (const std::unique_ptr<Buffer>& b : k.coop_x) bytes += size_t(b->size());
  return bytes;
}

bool products_in_f16(const MatvecKernels& k, int64_t rows, int64_t cols, uint32_t n_tokens) {
  return coop_path(k, rows, cols, n_tokens);
}

bool activations_in_int8(const MatvecKernels& k, int64_t rows, int64_t cols, uint32_t n_tokens) {
  return dot_path(k, rows, cols, n_tokens);
}

bool takes_int8_x(const MatvecKernels& k, int64_t rows, int64_t cols, uint32_t n_tokens) {
  return dot_path(k, rows, cols, n_tokens);
}

bool runs_matvec_shader(const MatvecKernels& k, int64_t rows, int64_t cols, uint32_t n_tokens) {
  return !tiled_path(k, rows, n_tokens) && !dot_path(k, rows, cols, n_tokens);
}

Result<void> record_matvec_kernels(Recorder& rec, const MatvecKernels& k, const GpuMatrix& w,
                                   const GpuMatrix* up, Binding x, Binding y, uint32_t n_tokens,
                                   Binding x_int8) {
  INFER_CHECK(w.format == k.format, "matvec: %s weights given to the %s op",
              weight_format_name(w.format), weight_format_name(k.format));
  INFER_CHECK(n_tokens > 0, "matvec: no tokens");
  INFER_CHECK(w.buffer.size() >= device_row_bytes(w.format, w.cols) * size_t(w.rows),
              "matvec: weights \"%s\" too small", w.buffer.name().c_str());
  INFER_CHECK((up != nullptr) == k.gate_up, "matvec: up matrix %s for a %s op",
              up ? "given" : "missing", k.gate_up ? "gate-up" : "plain");
  if (up != nullptr) {
    INFER_CHECK(up->format == w.format && up->rows == w.rows && up->cols == w.cols,
                "gate-up: up \"%s\" [%lld, %lld] %s differs from gate \"%s\" [%lld, "
                "%lld] %s",
                up->buffer.name().c_str(), (long long)up->rows, (long long)up->cols,
                weight_format_name(up->format), w.buffer.name().c_str(), (long long)w.rows,
                (long long)w.cols, weight_format_name(w.format));
    INFER_CHECK(up->buffer.size() >= device_row_bytes(up->format, up->cols) * size_t(up->rows),
                "gate-up: weights \"%s\" too small", up->buffer.name().c_str());
  }
  INFER_CHECK(x.buffer->size() - x.offset >= VkDeviceSize(n_tokens) * VkDeviceSize(w.cols) * 4,
              "matvec: x \"%s\" holds fewer than %u x %lld floats", x.buffer->name().c_str(),
              n_tokens, (long long)w.cols);
  INFER_CHECK(y.buffer->size() - y.offset >= VkDeviceSize(n_tokens) * VkDeviceSize(w.rows) * 4,
              "matvec: y \"%s\" holds fewer than %u x %lld floats", y.buffer->name().c_str(),
              n_tokens, (long long)w.rows);

  shader::MatvecPush push{};
  push.rows = uint32_t(w.rows);
  push.cols = uint32_t(w.cols);
  push.n_tokens = n_tokens;
  push.x_stride = uint32_t(w.cols);
  push.y_stride = uint32_t(w.rows);
  push.split = 1;

  const MatvecTuning& t = k.tuning;
  const bool tiled = tiled_path(k, w.rows, n_tokens);
  const bool small = tiled && small_tile_path(k, w.rows, n_tokens);
  const bool coop = coop_path(k, w.rows, w.cols, n_tokens);
  const bool dot = dot_path(k, w.rows, w.cols, n_tokens);
  if (!tiled && !dot) push.split = matvec_split(k, w.rows, w.cols);
  // Rows a subgroup and unroll per product (matvec_one_token_shape, matvec_shape.cpp, says why).
  uint32_t rows_per_subgroup = t.rows_per_subgroup;
  const Pipeline* shaped = nullptr;  // one_token or one of its variants
  if (n_tokens == 1 && !tiled && !dot && push.split == 1) {
    const OneTokenShape shape = matvec_one_token_shape(k, w.rows, w.cols);
    rows_per_subgroup = shape.rows_per_subgroup;
    shaped = shape.pipeline;
  }
  // The half cooperative tile where the full one leaves the grid short (matvec.h).
  const bool coop_half = coop && k.coop_small != nullptr &&
                         tile_groups(w.rows, n_tokens, t.coop_rows, t.coop_tokens) <
                             k.coop_small_below;
  const Pipeline& p = coop_half           ? *k.coop_small
                      : coop              ? *k.coop
                      : small             ? *k.tiled_small
                      : tiled             ? *k.tiled
                      : dot               ? (n_tokens == 1 ? *k.dot_one_token : *k.dot_many_tokens)
                      : shaped != nullptr ? *shaped
                      : n_tokens == 1     ? *k.one_token
                                          : *k.many_tokens;
  const uint32_t slots = t.subgroups_per_group / push.split;  // matvec.comp's row slots
  const uint32_t rows_per_group = coop_half ? t.coop_rows / 2
                                  : coop    ? t.coop_rows
                                  : small ? k.small_tile_rows
                                  : tiled ? t.tile_rows
                                  : dot   ? t.dot_subgroups_per_group * t.dot_rows_per_subgroup
                                          : slots * rows_per_subgroup;
  const uint32_t tokens_per_group = coop            ? t.coop_tokens
                                    : small         ? k.small_tile_tokens
                                    : tiled         ? t.tile_tokens
                                    : n_tokens == 1 ? 1
                                                    : t.tokens_per_group;

  // Row groups fill x up to the device limit, then wrap into z (262144-row vocab heads).
  const uint32_t row_groups = uint32_t((w.rows + rows_per_group - 1) / rows_per_group);
  Groups g;
  g.x = std::min(row_groups, k.max_workgroups_x);
  g.z = (row_groups + g.x - 1) / g.x;
  g.y = (n_tokens + tokens_per_group - 1) / tokens_per_group;
  if (x_int8.buffer != nullptr) {
    INFER_CHECK(dot, "matvec: int8 x given to a product of \"%s\" that takes f32",
                w.buffer.name().c_str());
    const VkDeviceSize bytes = int8_x_bytes(n_tokens, uint64_t(w.cols));
    INFER_CHECK(x_int8.buffer->size() >= x_int8.offset + bytes,
                "matvec: int8 x \"%s\" under %llu bytes", x_int8.buffer->name().c_str(),
                (unsigned long long)bytes);
    x = x_int8;
  } else if (dot) {
    INFER_TRY(const Binding prepared, record_coop_x_prep(rec, k, x, w.cols, n_tokens));
    x = prepared;
  }
  const Binding bindings[] = {Binding{&w.buffer}, x, y,
                              up != nullptr ? Binding{&up->buffer} : Binding{}};
  const size_t n_bindings = up != nullptr ? 4 : 3;
  return rec.dispatch(p, std::span<const Binding>(bindings, n_bindings), &push,
                      uint32_t(sizeof(push)), g);
}

Result<std::unique_ptr<MatvecOp>> MatvecOp::create(const VulkanContext& ctx, WeightFormat format,
                                                   MatvecTuning tuning) {
  std::unique_ptr<MatvecOp> op(new MatvecOp());
  INFER_TRY(op->k_, create_matvec_kernels(ctx, format, /*gate_up=*/false, tuning));
  return op;
}

MatvecOp::~MatvecOp() = default;

Result<void> MatvecOp::record(Recorder& rec, const GpuMatrix& w, Binding x, Binding y,
                              uint32_t n_tokens, Binding x_int8) const {
  return record_matvec_kernels(rec, k_, w, nullptr, x, y, n_tokens, x_int8);
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
