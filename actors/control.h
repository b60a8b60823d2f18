// What the stream's per-token loop reads without waiting for a message (DESIGN.md §3): the
// interrupt, the gate's stop and how far the gate has got. Shared by the pipeline, the stream
// and the gate; atomics only, so Pipeline::interrupt() is safe in a signal handler.
#pragma once

#include <atomic>
#include <cstdint>

namespace infer::actors {

struct Control {
  // Bumped by every interrupt. A turn remembers the epoch its input was sent under and stops
  // when it changes, so an interrupt is never lost to a turn that has not started yet, and
  // never leaks into input sent after it (a bool cleared at turn start would do both).
  std::atomic<uint64_t> interrupt_epoch{0};
  // The turn the gate told to stop (listen or act); 0: none (turns count from 1).
  std::atomic<uint64_t> gate_stop_turn{0};
  // Tokens the gate has judged over the session; the stream runs at most kGateLead ahead of it,
  // so a gate stop lands within kGateLead tokens. Far more than the hop takes, so the stream
  // never waits on it in practice (decode takes milliseconds, a hop microseconds).
  std::atomic<int64_t> gate_seen{0};
  std::atomic<bool> shutting_down{false};

  static_assert(std::atomic<uint64_t>::is_always_lock_free, "signal-safe interrupt");
};

inline constexpr int64_t kGateLead = 4;

}  // namespace infer::actors
