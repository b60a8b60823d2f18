// What the interrupt tests share: two PTY sources, a clock moved by hand, the kinds of events.
#pragma once

#include <functional>
#include <vector>

#include "tools_vfs/interrupts.h"

namespace infer::tools::test_interrupts {

using Kind = InterruptEventKind;

inline constexpr InterruptSource kPty1{SourceKind::kPty, 1};
inline constexpr InterruptSource kPty2{SourceKind::kPty, 2};

// A clock the test moves by hand.
struct FakeClock {
  InterruptSet::Clock::time_point t{};
  std::function<InterruptSet::Clock::time_point()> fn() {
    return [this] { return t; };
  }
};

inline std::vector<Kind> kinds(const std::vector<InterruptEvent>& events) {
  std::vector<Kind> out;
  for (const auto& e : events) out.push_back(e.kind);
  return out;
}

}  // namespace infer::tools::test_interrupts
