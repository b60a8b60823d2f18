// The device's ordering costs: replayed recordings of empty dispatches (chained by barriers or
// not) and of one persistent dispatch crossing a grid barrier per phase (shaders/sync_probe.comp).
#include "bench/sync_cost.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "gpu/buffer.h"
#include "gpu/context.h"
#include "gpu/gpu_bandwidth.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"

namespace infer::bench {
using namespace infer::gpu;
namespace {

struct ProbePush {
  uint32_t phases;
  uint32_t spin_limit;
  uint32_t form;  // 0: by generation, 1: by count (sync_probe.comp)
};

}  // namespace

Result<SyncCost> measure_sync_cost(const VulkanContext& ctx, uint32_t dispatches, uint32_t phases,
                                   uint32_t grid_groups, uint32_t local_size, int passes) {
  if (dispatches == 0 || phases == 0 || grid_groups == 0 || local_size == 0 || passes < 1) {
    return make_error(ErrorCode::kInvalidArgument, "sync cost: empty measurement");
  }
  const DeviceInfo& info = ctx.info();
  local_size = std::min(local_size, info.max_workgroup_invocations);
  grid_groups = std::min(grid_groups, info.max_workgroup_count[0]);
  SyncCost cost;
  cost.dispatch_groups = grid_groups;
  cost.grid_groups = grid_groups;

  // Same shader, two access declarations: written, each dispatch waits for the one before it
  // (the Recorder's write-after-write barrier); read, none of them waits.
  PipelineDesc desc;
  desc.variant = "sync_probe";
  desc.spirv = probe_spirv("sync_probe");
  desc.push_bytes = sizeof(ProbePush);
  desc.spec = {{0, local_size}};
  desc.bindings = {Access::kReadWrite, Access::kReadWrite};
  INFER_TRY(std::unique_ptr<Pipeline> chained, Pipeline::create(ctx, desc));
  desc.bindings = {Access::kRead, Access::kRead};
  INFER_TRY(std::unique_ptr<Pipeline> free, Pipeline::create(ctx, desc));

  const size_t sync_words = 3 + 2 * size_t(grid_groups);
  INFER_TRY(Buffer sync, Buffer::create(ctx, sync_words * sizeof(uint32_t), BufferKind::kDevice,
                                        "sync probe"));
  INFER_TRY(Buffer error, Buffer::create(ctx, sizeof(uint32_t), BufferKind::kDevice,
                                         "sync probe error"));
  const std::vector<uint32_t> zeros(sync_words, 0);
  INFER_TRY_VOID(upload(ctx, sync, 0, zeros.data(), zeros.size() * sizeof(uint32_t)));
  INFER_TRY_VOID(upload(ctx, error, 0, zeros.data(), sizeof(uint32_t)));

  INFER_TRY(std::unique_ptr<Recorder> rec, Recorder::create(ctx));
  const ProbePush empty{0, kProbeSpinLimit, 0};
  for (const Pipeline* p : {chained.get(), free.get()}) {
    INFER_TRY_VOID(rec->begin(/*reusable=*/true));
    for (uint32_t i = 0; i < dispatches; ++i) {
      INFER_TRY_VOID(rec->dispatch(*p, {Binding{&sync}, Binding{&error}}, empty,
                                   Groups{grid_groups, 1, 1}));
    }
    INFER_TRY_VOID(rec->end());
    INFER_TRY(const double s, replay_median_seconds(*rec, passes));
    (p == chained.get() ? cost.dependent_dispatch_us : cost.free_dispatch_us) =
        s / dispatches * 1e6;
  }

  // Each form of the grid barrier in its own recording, its error bits read after it.
  for (uint32_t form : {0u, 1u}) {
    INFER_TRY_VOID(upload(ctx, error, 0, zeros.data(), sizeof(uint32_t)));
    INFER_TRY_VOID(rec->begin(/*reusable=*/true));
    INFER_TRY_VOID(rec->dispatch(*chained, {Binding{&sync}, Binding{&error}},
                                 ProbePush{phases, kProbeSpinLimit, form}, Groups{grid_groups, 1, 1}));
    INFER_TRY_VOID(rec->end());
    INFER_TRY(const double s, replay_median_seconds(*rec, passes));
    uint32_t bits = 0;
    INFER_TRY_VOID(download(ctx, error, 0, &bits, sizeof(bits)));
    (form == 0 ? cost.grid_barrier_us : cost.grid_barrier_count_us) = s / phases * 1e6;
    (form == 0 ? cost.grid_barrier_ok : cost.grid_barrier_count_ok) = bits == 0;
  }
  return cost;
}

}  // namespace infer::bench
