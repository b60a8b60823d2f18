// Element-wise and per-row ops: pipelines sized from the device (all built in create()), the
// scratch of the two-pass argmax / top-k, and record().
#include "gpu/ops/elementwise.h"

#include <algorithm>
#include <string>
#include <vector>

#include "base/check.h"
#include "gpu/context.h"
#include "gpu/ops/op_common.h"
#include "shaders/elementwise.h"

namespace infer::gpu {
namespace {

static_assert(sizeof(shader::GeluMulPush) == 6 * sizeof(uint32_t),
              "GeluMulPush must match shaders/elementwise.h (32-bit scalars only)");
static_assert(sizeof(shader::SoftcapPush) == 2 * sizeof(uint32_t),
              "SoftcapPush must match shaders/elementwise.h (32-bit scalars only)");
static_assert(sizeof(shader::SelectPush) == 7 * sizeof(uint32_t),
              "SelectPush must match shaders/elementwise.h (32-bit scalars only)");

constexpr uint32_t kInvocations = 256;
// Workgroups argmax / top-k aim for across all rows: enough to spread one 262144-logit row over
// every compute unit of a big GPU (an H200 has 132), cheap on small ones. Rows beyond this count
// get one workgroup each and a single pass.
constexpr uint32_t kTargetGroups = 256;
// An argmax workgroup reads at least this many logits an invocation, so the second pass stays
// short.
constexpr uint32_t kArgmaxPerInvocation = 8;
// top_k keeps up to 2048 (value, index) pairs in shared memory: 16 KiB, sorted in 66 bitonic
// steps. Smaller where the device has less shared memory; at least 512 (> 2 x kMaxTopK).
constexpr uint32_t kMaxSortSize = 2048;
constexpr uint32_t kMinSortSize = 512;
// First-pass results of a split row: T·n_segs < 2·kTargetGroups (n_segs > 1 only while
// T < kTargetGroups), each k entries.
constexpr uint64_t kScratchEntries = 2 * uint64_t(kTargetGroups) * ElementwiseOps::kMaxTopK;

// Workgroups per row and the entries each reduces, for T rows of n entries: split only while
// there are fewer than kTargetGroups rows, and into segments of at least min_seg entries.
struct Split {
  uint32_t n_segs = 1;
  uint32_t seg_len = 0;
};

Split split_rows(uint32_t T, uint32_t n, uint32_t min_seg, uint32_t align) {
  Split s;
  s.seg_len = n;
  if (T >= kTargetGroups) return s;
  const uint32_t want = std::min((kTargetGroups + T - 1) / T, std::max(1u, n / min_seg));
  if (want <= 1) return s;
  s.seg_len = ((n + want - 1) / want + align - 1) / align * align;  // whole workgroup strides
  s.n_segs = (n + s.seg_len - 1) / s.seg_len;
  return s;
}

// Whether the byte ranges [a, a + a_bytes) and [b, b + b_bytes) of the same buffer meet.
bool overlap(const Binding& a, uint64_t a_bytes, const Binding& b, uint64_t b_bytes) {
  return a.buffer == b.buffer && a.offset < b.offset + b_bytes && b.offset < a.offset + a_bytes;
}

}  // namespace

struct ElementwiseOps::Pipelines {
  const VulkanContext* ctx = nullptr;
  uint32_t local = 0;      // every pipeline's workgroup size
  uint32_t sort_size = 0;  // top_k's shared entries
  std::unique_ptr<Pipeline> gelu_mul, softcap, argmax, top_k;
  // First-pass results of split rows, and the binding of values argmax's last pass does not
  // write.
  Buffer scratch_values, scratch_indices, unused_out;

  Result<void> select(Recorder& rec, const Pipeline& p, Binding logits, Binding values,
                      Binding indices, uint32_t T, uint32_t V, uint32_t k, uint32_t min_seg,
                      uint32_t chunk) const;
};

ElementwiseOps::~ElementwiseOps() = default;

Result<std::unique_ptr<ElementwiseOps>> ElementwiseOps::create(const VulkanContext& ctx) {
  std::unique_ptr<ElementwiseOps> op(new ElementwiseOps());
  op->p_ = std::make_unique<Pipelines>();
  Pipelines& p = *op->p_;
  p.ctx = &ctx;
  const WorkgroupSize size = workgroup_size(ctx.info(), kInvocations);
  p.local = size.local;

  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(ctx.physical_device(), &props);
  const uint32_t shared_bytes = props.limits.maxComputeSharedMemorySize;
  p.sort_size = kMaxSortSize;
  while (p.sort_size > kMinSortSize && p.sort_size * 8 + 64 > shared_bytes) p.sort_size /= 2;
  if (p.sort_size * 8 + 64 > shared_bytes || p.sort_size < kMaxTopK + p.local) {
    return make_error(ErrorCode::kUnsupported,
                      "top_k: " + std::to_string(shared_bytes) + " bytes of shared memory and " +
                          std::to_string(p.local) + "-invocation workgroups are too small");
  }

  const Access R = Access::kRead, W = Access::kWrite;
  auto make = [&](const char* variant, std::vector<Access> bindings, uint32_t push_bytes,
                  std::vector<SpecConstant> spec) {
    PipelineDesc desc;
    desc.variant = variant;
    desc.bindings = std::move(bindings);
    desc.push_bytes = push_bytes;
    desc.spec = std::move(spec);
    desc.spec.insert(desc.spec.begin(), {INFER_ELEMENTWISE_SPEC_LOCAL_SIZE, size.local});
    return Pipeline::create(ctx, desc);
  };
  INFER_TRY(p.gelu_mul, make("gelu_mul", {R, R, W}, sizeof(shader::GeluMulPush), {}));
  INFER_TRY(p.softcap, make("softcap", {Access::kReadWrite}, sizeof(shader::SoftcapPush), {}));
  INFER_TRY(p.argmax, make("argmax", {R, R, W, W}, sizeof(shader::SelectPush),
                           {{INFER_ELEMENTWISE_SPEC_MAX_SUBGROUPS, size.max_subgroups}}));
  INFER_TRY(p.top_k, make("top_k", {R, R, W, W}, sizeof(shader::SelectPush),
                          {{INFER_ELEMENTWISE_SPEC_SORT_SIZE, p.sort_size}}));

  INFER_TRY(p.scratch_values,
            Buffer::create(ctx, kScratchEntries * 4, BufferKind::kDevice, "select scratch values"));
  INFER_TRY(p.scratch_indices, Buffer::create(ctx, kScratchEntries * 4, BufferKind::kDevice,
                                              "select scratch indices"));
  INFER_TRY(p.unused_out, Buffer::create(ctx, 16, BufferKind::kDevice, "select unused output"));
  return op;
}

Result<void> ElementwiseOps::gelu_mul(Recorder& rec, Binding a, uint32_t a_stride, uint32_t a_off,
                                      Binding b, uint32_t b_stride, uint32_t b_off, Binding out,
                                      uint32_t T, uint32_t n) const {
  const DeviceInfo& info = p_->ctx->info();
  INFER_CHECK(T > 0 && n > 0 && T <= info.max_workgroup_count[1], "gelu_mul: T %u, n %u", T, n);
  const uint64_t a_words = uint64_t(T - 1) * a_stride + a_off + n;
  const uint64_t b_words = uint64_t(T - 1) * b_stride + b_off + n;
  check_words("gelu_mul", "a", a, a_words);
  check_words("gelu_mul", "b", b, b_words);
  check_words("gelu_mul", "out", out, uint64_t(T) * n);
  // In place only element for element: another layout would let one invocation overwrite what
  // another has yet to read.
  const bool in_place =
      out.buffer == a.buffer && out.offset == a.offset && a_stride == n && a_off == 0;
  INFER_CHECK(in_place || !overlap(out, uint64_t(T) * n * 4, a, a_words * 4),
              "gelu_mul: out overlaps a without being a");
  INFER_CHECK(!overlap(out, uint64_t(T) * n * 4, b, b_words * 4), "gelu_mul: out overlaps b");
  const shader::GeluMulPush push{n, T, a_stride, a_off, b_stride, b_off};
  Groups g;
  g.x = (n + p_->local - 1) / p_->local;
  g.y = T;
  return rec.dispatch(*p_->gelu_mul, {a, b, out}, push, g);
}

Result<void> ElementwiseOps::softcap(Recorder& rec, Binding y, uint32_t count, float cap) const {
  INFER_CHECK(count > 0 && cap > 0.0f, "softcap: count %u, cap %g", count, double(cap));
  check_words("softcap", "y", y, count);
  const shader::SoftcapPush push{count, cap};
  const uint32_t groups = uint32_t((uint64_t(count) + p_->local - 1) / p_->local);
  return rec.dispatch(*p_->softcap, {y}, push, wrapped_groups(p_->ctx->info(), groups));
}

Result<void> ElementwiseOps::Pipelines::select(Recorder& rec, const Pipeline& p, Binding logits,
                                               Binding values, Binding indices, uint32_t T,
                                               uint32_t V, uint32_t k, uint32_t min_seg,
                                               uint32_t chunk) const {
  const Split s = split_rows(T, V, min_seg, local);
  const bool argmax = &p == this->argmax.get();
  // A first pass reads no indices: it binds the logits there too, so that even a load the
  // compiler hoists past `from_logits` stays in bounds.
  const Binding unused_out_b{&unused_out};
  if (s.n_segs == 1) {
    const shader::SelectPush push{V, V, 1, k, 1, argmax ? 0u : 1u, chunk};
    return rec.dispatch(p, {logits, logits, argmax ? unused_out_b : values, indices}, push,
                        Groups{1, T, 1});
  }
  INFER_CHECK(uint64_t(T) * s.n_segs * k <= kScratchEntries, "select: scratch too small");
  const Binding sv{&scratch_values}, si{&scratch_indices};
  const shader::SelectPush first{V, s.seg_len, s.n_segs, k, 1, 1, chunk};
  INFER_TRY_VOID(rec.dispatch(p, {logits, logits, sv, si}, first, Groups{s.n_segs, T, 1}));
  const uint32_t n = s.n_segs * k;
  const shader::SelectPush last{n, n, 1, k, 0, argmax ? 0u : 1u, chunk};
  return rec.dispatch(p, {sv, si, argmax ? unused_out_b : values, indices}, last, Groups{1, T, 1});
}

Result<void> ElementwiseOps::argmax(Recorder& rec, Binding logits, Binding out, uint32_t T,
                                    uint32_t V) const {
  INFER_CHECK(T > 0 && V > 0 && T <= p_->ctx->info().max_workgroup_count[1], "argmax: T %u, V %u",
              T, V);
  check_words("argmax", "logits", logits, uint64_t(T) * V);
  check_words("argmax", "out", out, T);
  return p_->select(rec, *p_->argmax, logits, Binding{}, out, T, V, 1,
                    p_->local * kArgmaxPerInvocation, 0);
}

Result<void> ElementwiseOps::top_k(Recorder& rec, Binding logits, Binding values, Binding indices,
                                   uint32_t T, uint32_t V, uint32_t k) const {
  INFER_CHECK(T > 0 && V > 0 && T <= p_->ctx->info().max_workgroup_count[1], "top_k: T %u, V %u", T,
              V);
  INFER_CHECK(k >= 1 && k <= kMaxTopK && k <= V, "top_k: k %u of V %u (at most %u)", k, V,
              kMaxTopK);
  check_words("top_k", "logits", logits, uint64_t(T) * V);
  check_words("top_k", "values", values, uint64_t(T) * k);
  check_words("top_k", "indices", indices, uint64_t(T) * k);
  // Entries read between flushes: whole workgroup strides that fit beside the best k.
  const uint32_t chunk = (p_->sort_size - k) / p_->local * p_->local;
  return p_->select(rec, *p_->top_k, logits, values, indices, T, V, k, p_->sort_size, chunk);
}

}  // namespace infer::gpu
