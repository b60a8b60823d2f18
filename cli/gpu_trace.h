// --trace with --gpu: a Forward that passes every call to the GpuForward and then reports its
// host-measured submit and wait (gpu::StepTiming) as "gpu submit" / "gpu wait" spans on the
// calling actor's track (the stream's), inside the token or prefill-chunk span around the call.
#pragma once

#include <memory>

#include "actors/tracer.h"
#include "gpu/gpu_forward.h"
#include "model/forward.h"

namespace infer::cli {

class GpuTracedForward final : public Forward {
 public:
  // `inner` keeps `gpu` (the same object) alive; `tracer` must outlive this.
  GpuTracedForward(std::shared_ptr<Forward> inner, gpu::GpuForward* gpu, actors::Tracer* tracer);

  Result<void> prefill(std::span<const int32_t> ids, float* logits,
                       bool all_logits = false) override;
  Result<void> decode(int32_t id, float* logits) override;
  void reset() override { inner_->reset(); }
  int64_t position() const override { return inner_->position(); }
  int64_t vocab_size() const override { return inner_->vocab_size(); }
  KvRingAccess* kv_ring() override { return inner_->kv_ring(); }

 private:
  // The call ran from t0 to t1 (steady ns) and ended with one submit and wait.
  void report(int64_t t0, int64_t t1, bool last_chunk_only) const;

  std::shared_ptr<Forward> inner_;
  gpu::GpuForward* gpu_;
  actors::Tracer* tracer_;
};

}  // namespace infer::cli
