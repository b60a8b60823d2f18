// Quiescence on the Vulkan path (DESIGN.md §6, docs/QUIESCENCE.md): the state GpuForward keeps
// when it is on. The skip decision is model/quiescence.h's Quiescence object, the CPU's own, fed
// the probe rows read back from the device, so the two paths cannot drift apart.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "gpu/buffer.h"
#include "gpu/recorder.h"
#include "model/quiescence.h"

namespace infer::gpu {

// Which layers a recording holds. Off, every recording is kWhole (one submit per chunk). On, a
// decode token (T = 1) runs kLower, the host decides, then kUpper or kCarried.
enum class Part {
  kWhole,    // embed .. the last layer, the KV commit and the head
  kLower,    // embed .. the skip depth d (the deepest probe), probe rows copied to the host
  kUpper,    // layers d+1 .. L-1, the carried-from snapshots copied to the host, commit, head
  kCarried,  // a skipped token: the carried streams from the host, K/V rows only, commit, head
};

struct GpuQuiet {
  GpuQuiet(const QuiescenceConfig& cfg, int n_layers, int64_t hidden, int64_t max_chunk)
      : q(cfg, n_layers, hidden, max_chunk) {}

  Quiescence q;
  std::vector<int> probe_layers;  // ascending; the last is the skip depth
  std::vector<int> kv_layers;     // layers after the skip depth that own KV (K/V still filled)
  std::vector<char> snap_layer;   // [L]: the stream after this layer is copied back on full rows
  Buffer probes;  // host [probes, C, H]: the chunk's stream after each probe layer
  Buffer snaps;   // host [L, H]: the last row after each snap_layer (rows d+1.. only)
  Buffer carry;   // host [kv_layers + 1, H]: a skipped token's carried inputs, then its stream
  std::unique_ptr<Recorder> lower;
  // By Head (kNone, kLast, kAll, kArgmax): recorded at set_quiescence for kLast and kArgmax,
  // on first use for the others.
  std::array<std::unique_ptr<Recorder>, 4> upper, carried;
};

}  // namespace infer::gpu
