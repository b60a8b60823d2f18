// GpuForward::synthesize_context (gpu_forward.h): a long stream's state without streaming it, for
// --bench-context on the GPU (cli/bench_stream.cpp).
#include <cstring>
#include <string>

#include "gpu/context.h"
#include "gpu/gpu_forward_impl.h"

namespace infer::gpu {

Result<void> GpuForward::synthesize_context(int64_t n) {
  Impl& m = *impl_;
  if (n < 0 || (!m.ring && n >= m.max_positions)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "synthesize_context: " + std::to_string(n) + " tokens, max_positions " +
                          std::to_string(m.max_positions));
  }
  // 0.01f in every K and V float: finite, equal scores (a uniform softmax), whatever the slot.
  const float value = 0.01f;
  uint32_t word = 0;
  std::memcpy(&word, &value, sizeof word);
  const int L = int(m.model->config().text.num_hidden_layers);
  for (int layer = 0; layer < L; ++layer) {
    KvRing* own = const_cast<KvRing*>(m.kv->own(layer));  // the rows, not the ring's shape
    if (own == nullptr) continue;  // KV-shared: reads its donor's
    INFER_TRY_VOID(fill(*m.ctx, own->k, word));
    INFER_TRY_VOID(fill(*m.ctx, own->v, word));
  }
  if (m.ring) m.ring->synthesize_context(n);
  m.pos = n;
  return Ok{};
}

}  // namespace infer::gpu
