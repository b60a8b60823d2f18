// The monotonic clock the CLI's timings use, and the seconds since one of its time points.
#pragma once

#include <chrono>

namespace infer {

using SteadyClock = std::chrono::steady_clock;

inline double seconds_since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

}  // namespace infer
