// --bench --gpu --profile: one decode step and one prefill chunk replayed with a GPU timestamp
// after every command, summed per pipeline (the variant and its specialization) for the JSON.
#pragma once

#include <cstdint>
#include <span>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "gpu/gpu_forward.h"

namespace infer::cli {

// Profiles a decode step of `next` at the forward's position, then (after a reset) a prefill
// chunk of the first ids (at most the forward's chunk length): both leave the stream reset.
Result<nlohmann::ordered_json> profile_gpu(gpu::GpuForward& fwd, int32_t next,
                                           std::span<const int32_t> prompt, int64_t chunk);

}  // namespace infer::cli
