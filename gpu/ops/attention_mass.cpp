// AttentionMassOps: attend_mass.comp's two phases per tiered layer (row log-sum-exp, then key
// mass), its buffers, and the read-back for the host's KvRing::add_mass.
#include "gpu/ops/attention_mass.h"

#include <algorithm>
#include <string>

#include "base/check.h"
#include "gpu/context.h"
#include "gpu/ops/op_common.h"
#include "shaders/attention.h"
#include "shaders/step.h"

namespace infer::gpu {
namespace {

static_assert(sizeof(shader::MassPush) == 7 * sizeof(uint32_t), "MassPush: 32-bit scalars");

}  // namespace

struct AttentionMassOps::State {
  Limits limits;
  uint32_t keys_per_group = 1;  // the fewest subgroups a workgroup may have (phase 1)
  std::unique_ptr<Pipeline> pipeline;
  Buffer lse;        // [max_T · max_n_q]
  Buffer mass;       // device [max_keys]
  Buffer mass_host;  // host [max_keys]
};

AttentionMassOps::~AttentionMassOps() = default;

Result<std::unique_ptr<AttentionMassOps>> AttentionMassOps::create(const VulkanContext& ctx,
                                                                   const Limits& limits) {
  if (limits.max_T == 0 || limits.max_n_q == 0 || limits.max_d < 2 || limits.max_d % 2 != 0 ||
      limits.max_keys == 0) {
    return make_error(ErrorCode::kShape,
                      "attention mass: limits max_T " + std::to_string(limits.max_T) +
                          ", max_n_q " + std::to_string(limits.max_n_q) + ", max_d " +
                          std::to_string(limits.max_d) + ", max_keys " +
                          std::to_string(limits.max_keys));
  }
  const DeviceInfo& info = ctx.info();
  std::unique_ptr<AttentionMassOps> op(new AttentionMassOps());
  op->s_ = std::make_unique<State>();
  State& s = *op->s_;
  s.limits = limits;
  // As attend: unpinned, the register chunks cover the smallest subgroup size and the key grid
  // the largest.
  const AttentionLanes lanes = attention_lanes(info);
  const uint32_t local_size = lanes.local_size, smallest = lanes.smallest;
  s.keys_per_group = std::max(1u, local_size / lanes.largest);

  PipelineDesc desc;
  desc.variant = "attend_mass";
  using A = Access;
  desc.bindings = {A::kRead, A::kRead, A::kRead, A::kRead, A::kReadWrite, A::kReadWrite};
  desc.push_bytes = sizeof(shader::MassPush);
  desc.spec = {{INFER_ATTN_SPEC_LOCAL_SIZE, local_size},
               {INFER_ATTN_SPEC_MAX_SUBGROUPS, std::max(1u, local_size / smallest)},
               {INFER_ATTN_SPEC_D_CHUNKS, div_up(limits.max_d, smallest)},
               {INFER_ATTN_SPEC_KV_MODE, INFER_KV_TIERED}};  // mass: tiered layers only
  desc.required_subgroup_size = lanes.pin ? lanes.subgroup : 0;
  INFER_TRY(s.pipeline, Pipeline::create(ctx, desc));

  const VkDeviceSize lse_bytes = VkDeviceSize(limits.max_T) * limits.max_n_q * sizeof(float);
  const VkDeviceSize mass_bytes = VkDeviceSize(limits.max_keys) * sizeof(float);
  INFER_TRY(s.lse, Buffer::create(ctx, lse_bytes, BufferKind::kDevice, "attention mass lse"));
  INFER_TRY(s.mass, Buffer::create(ctx, mass_bytes, BufferKind::kDevice, "attention mass"));
  INFER_TRY(s.mass_host,
            Buffer::create(ctx, mass_bytes, BufferKind::kHost, "attention mass (host)"));
  return op;
}

Result<void> AttentionMassOps::record(Recorder& rec, Binding step, const AttentionDims& dims,
                                      Binding q, Binding k_cache, Binding inv_freq,
                                      bool accumulate) const {
  const State& s = *s_;
  INFER_CHECK(dims.mode == INFER_KV_TIERED && dims.window == 0,
              "attention mass: mode %u, window %u (tiered full layers only)", dims.mode,
              dims.window);
  INFER_CHECK(dims.T >= 1 && dims.T <= s.limits.max_T && dims.n_q <= s.limits.max_n_q &&
                  dims.d >= 2 && dims.d % 2 == 0 && dims.d <= s.limits.max_d &&
                  dims.n_kv >= 1 && dims.n_q % dims.n_kv == 0,
              "attention mass: T %u, n_q %u, n_kv %u, d %u (limits T %u, n_q %u, d %u)", dims.T,
              dims.n_q, dims.n_kv, dims.d, s.limits.max_T, s.limits.max_n_q, s.limits.max_d);
  const VkDeviceSize rows = VkDeviceSize(dims.slots + dims.T) * dims.n_kv * dims.d;
  INFER_CHECK(k_cache.buffer != nullptr && k_cache.buffer->size() >= rows * sizeof(float) &&
                  q.buffer != nullptr && inv_freq.buffer != nullptr,
              "attention mass: k_cache of %u + %u rows, q and inv_freq bound", dims.slots,
              dims.T);
  shader::MassPush push{};
  push.T = dims.T;
  push.n_q = dims.n_q;
  push.n_kv = dims.n_kv;
  push.d = dims.d;
  push.slots = dims.slots;
  push.accumulate = accumulate ? 1u : 0u;
  const Binding lse{&s.lse}, mass{&s.mass};
  push.phase = 0;
  INFER_TRY_VOID(rec.dispatch(*s.pipeline, {step, q, k_cache, inv_freq, lse, mass}, push,
                              Groups{dims.n_q, dims.T, 1}));
  push.phase = 1;
  return rec.dispatch(*s.pipeline, {step, q, k_cache, inv_freq, lse, mass}, push,
                      Groups{div_up(s.limits.max_keys, s.keys_per_group), 1, 1});
}

void AttentionMassOps::record_readback(Recorder& rec) const {
  rec.copy(s_->mass, 0, s_->mass_host, 0, s_->mass.size());
}

const float* AttentionMassOps::host() const {
  return static_cast<const float*>(s_->mass_host.mapped());
}

const Buffer& AttentionMassOps::device() const { return s_->mass; }

}  // namespace infer::gpu
