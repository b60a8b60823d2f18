// The chain probe (chain_cost.h): both forms recorded once, replayed, timed with fences, and
// their results compared.
#include "bench/chain_cost.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "gpu/buffer.h"
#include "gpu/context.h"
#include "gpu/gpu_bandwidth.h"
#include "bench/sync_cost.h"
#include "gpu/ops/op_common.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"

namespace infer::bench {
using namespace infer::gpu;
namespace {

struct ChainPush {
  uint32_t n;
  uint32_t first;
  uint32_t phases;
  uint32_t spin_limit;
  uint32_t prefetch;  // persistent form: the next link's weights loaded before its barrier
};

}  // namespace

void chain_probe_inputs(uint32_t n, uint32_t links, std::vector<float>* w,
                        std::vector<float>* x0) {
  std::mt19937 rng(1234);
  // Entries of variance 1/n keep x's norm about constant along the chain; uniform, since the
  // bench makes 67M of them (a normal distribution took seconds).
  const float a = std::sqrt(3.0f / float(n));
  std::uniform_real_distribution<float> dist(-a, a);
  w->resize(size_t(links) * n * n);
  for (float& v : *w) v = dist(rng);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  x0->resize(n);
  for (float& v : *x0) v = unit(rng);
}

Result<ChainCost> measure_chain_cost(const VulkanContext& ctx, uint32_t n, uint32_t links,
                                     uint32_t groups, uint32_t local_size, int passes) {
  if (n == 0 || n % 4 != 0 || links < 2 || groups == 0 || local_size == 0 || passes < 1) {
    return make_error(ErrorCode::kInvalidArgument,
                      "chain cost: n a multiple of 4, at least 2 links, groups and passes");
  }
  // The shader indexes the weights' vec4s with 32-bit words.
  if (uint64_t(links) * n * n / 4 >= (uint64_t(1) << 32)) {
    return make_error(ErrorCode::kInvalidArgument, "chain cost: weights too large");
  }
  const DeviceInfo& info = ctx.info();
  const uint32_t sub = std::max(1u, info.subgroup_size);
  local_size = std::max(sub, std::min(local_size, info.max_workgroup_invocations) / sub * sub);
  groups = std::min(groups, info.max_workgroup_count[0]);
  const uint32_t smallest = std::max(1u, info.min_subgroup_size);
  const uint32_t largest = std::max(sub, info.max_subgroup_size);
  // Rows a subgroup: enough that the fewest subgroups the driver may make cover n.
  const uint32_t fewest = std::max(1u, local_size / largest);
  const uint32_t rows = div_up(n, groups * fewest);
  const uint32_t vecs = div_up(n / 4, smallest);

  PipelineDesc desc;
  desc.variant = "chain_probe";
  desc.spirv = probe_spirv("chain_probe");
  desc.push_bytes = sizeof(ChainPush);
  desc.spec = {{0, local_size}, {1, vecs}, {2, rows}};
  desc.bindings = {Access::kRead, Access::kReadWrite, Access::kReadWrite, Access::kReadWrite};
  INFER_TRY(std::unique_ptr<Pipeline> pipeline, Pipeline::create(ctx, desc));

  std::vector<float> w_host, x0;
  chain_probe_inputs(n, links, &w_host, &x0);
  x0.resize(2 * size_t(n), 0.0f);  // rows 0 (the input) and 1
  INFER_TRY(Buffer w, Buffer::create(ctx, w_host.size() * sizeof(float), BufferKind::kDevice,
                                     "chain probe weights"));
  INFER_TRY_VOID(upload(ctx, w, 0, w_host.data(), w_host.size() * sizeof(float)));
  INFER_TRY(Buffer x, Buffer::create(ctx, x0.size() * sizeof(float), BufferKind::kDevice,
                                     "chain probe x"));
  INFER_TRY(Buffer sync, Buffer::create(ctx, sizeof(uint32_t), BufferKind::kDevice,
                                        "chain probe arrivals"));
  INFER_TRY(Buffer error, Buffer::create(ctx, sizeof(uint32_t), BufferKind::kDevice,
                                         "chain probe error"));
  const uint32_t zero = 0;
  INFER_TRY_VOID(upload(ctx, sync, 0, &zero, sizeof(zero)));
  INFER_TRY_VOID(upload(ctx, error, 0, &zero, sizeof(zero)));

  ChainCost cost;
  cost.n = n;
  cost.links = links;
  cost.groups = groups;
  INFER_TRY(std::unique_ptr<Recorder> rec, Recorder::create(ctx));
  const Binding bindings[] = {Binding{&w}, Binding{&x}, Binding{&sync}, Binding{&error}};
  const Groups grid{groups, 1, 1};
  // Forms: 0 a dispatch a link, 1 persistent with the next link's weights loaded before each
  // barrier, 2 persistent without (its weights loaded after).
  std::vector<float> results[3];  // each form's x after one replay from x0
  for (int form = 0; form < 3; ++form) {
    INFER_TRY_VOID(rec->begin(/*reusable=*/true));
    if (form == 0) {
      for (uint32_t k = 0; k < links; ++k) {
        const ChainPush push{n, k, 1, kProbeSpinLimit, 0};
        INFER_TRY_VOID(rec->dispatch(*pipeline, bindings, &push, sizeof(push), grid));
      }
    } else {
      const ChainPush push{n, 0, links, kProbeSpinLimit, form == 1 ? 1u : 0u};
      INFER_TRY_VOID(rec->dispatch(*pipeline, bindings, &push, sizeof(push), grid));
    }
    INFER_TRY_VOID(rec->end());
    INFER_TRY(const double s, replay_median_seconds(*rec, passes));
    const double per_link_us = s / links * 1e6;
    (form == 0 ? cost.dispatch_us : form == 1 ? cost.persistent_us : cost.persistent_late_us) =
        per_link_us;
    // One more replay from x0 for the result (the timed ones went on from each other's).
    INFER_TRY_VOID(upload(ctx, x, 0, x0.data(), x0.size() * sizeof(float)));
    INFER_TRY_VOID(rec->submit_and_wait());
    results[form].resize(n);
    INFER_TRY_VOID(download(ctx, x, uint64_t(links % 2) * n * sizeof(float),
                            results[form].data(), n * sizeof(float)));
  }
  uint32_t bits = 0;
  INFER_TRY_VOID(download(ctx, error, 0, &bits, sizeof(bits)));
  cost.ok = bits == 0 &&
            std::memcmp(results[0].data(), results[1].data(), n * sizeof(float)) == 0 &&
            std::memcmp(results[0].data(), results[2].data(), n * sizeof(float)) == 0;
  cost.result = std::move(results[0]);
  return cost;
}

}  // namespace infer::bench
