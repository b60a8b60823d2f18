// QuietTracker: the consolidation actor's debounce (DESIGN.md §3, §5), without CAF. Input makes
// the conversation busy; when every input's turn has ended the tracker is idle and hands out a
// timer generation; a timer that fires with the latest generation while still idle yields the
// span of positions [from, to) since the last quiet span (none when nothing new).
#pragma once

#include <cstdint>
#include <optional>

#include "actors/events.h"

namespace infer::actors {

class QuietTracker {
 public:
  void input() {
    ++pending_;
    ++generation_;  // any armed timer is stale now
  }
  // A turn ended with the context at `position`. Returns the generation to arm a timer with, or
  // nothing while more input is waiting for its turn.
  std::optional<uint64_t> turn_end(int64_t position) {
    if (pending_ > 0) --pending_;
    to_ = position;
    if (pending_ > 0) return std::nullopt;
    return ++generation_;
  }
  std::optional<QuietSpan> fire(uint64_t generation) {
    if (generation != generation_ || pending_ > 0 || to_ <= from_) return std::nullopt;
    const QuietSpan span{from_, to_};
    from_ = to_;
    return span;
  }
  // The conversation restarted at position 0.
  void reset() {
    from_ = to_ = 0;
    ++generation_;
  }

 private:
  int64_t pending_ = 0;
  uint64_t generation_ = 0;
  int64_t from_ = 0, to_ = 0;
};

}  // namespace infer::actors
