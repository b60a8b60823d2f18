// GpuTracedForward: StepTiming holds durations (host work, vkQueueSubmit, fence wait) of the last
// chunk, measured from the start of that chunk; the spans are placed from the call's start, which
// precedes the chunk's by a bounds check, and clamped to the call so that they always nest.
#include "cli/gpu_trace.h"

#include <algorithm>
#include <utility>

namespace infer::cli {

GpuTracedForward::GpuTracedForward(std::shared_ptr<Forward> inner, gpu::GpuForward* gpu,
                                   actors::Tracer* tracer)
    : inner_(std::move(inner)), gpu_(gpu), tracer_(tracer) {}

Result<void> GpuTracedForward::prefill(std::span<const int32_t> ids, float* logits,
                                       bool all_logits) {
  const int64_t t0 = actors::steady_ns();
  Result<void> r = inner_->prefill(ids, logits, all_logits);
  if (r) report(t0, actors::steady_ns(), int64_t(ids.size()) > gpu_->max_chunk());
  return r;
}

Result<void> GpuTracedForward::decode(int32_t id, float* logits) {
  const int64_t t0 = actors::steady_ns();
  Result<void> r = inner_->decode(id, logits);
  if (r) report(t0, actors::steady_ns(), false);
  return r;
}

void GpuTracedForward::report(int64_t t0, int64_t t1, bool last_chunk_only) const {
  const gpu::StepTiming& st = gpu_->last_step_timing();
  const auto ns = [](double s) { return int64_t(s * 1e9); };
  const int64_t submit_ns = ns(st.submit_s), wait_ns = ns(st.wait_s);
  // Several chunks: only the last one's timing is known; it ends about when the call does (the
  // logits copy follows), so place it back from the end.
  const int64_t begin = last_chunk_only ? std::max(t0, t1 - submit_ns - wait_ns)
                                        : std::min(t1, t0 + ns(st.host_s));
  const int64_t submit_end = std::min(t1, begin + submit_ns);
  const int64_t wait_end = std::min(t1, submit_end + wait_ns);
  tracer_->span("stream", "gpu submit", begin, submit_end, -1);
  tracer_->span("stream", "gpu wait", submit_end, wait_end, -1);
}

}  // namespace infer::cli
