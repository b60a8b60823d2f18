// The start's progress on stderr (base/progress.h's reporter): on a terminal one line redrawn in
// place ("infer: quantizing to Q4_0 12/35 layers"), left with its time when the stage took long
// enough to notice; on a pipe or file one plain line as each stage begins.
#pragma once

#include <cstdint>
#include <string>

#include "base/clock.h"
#include "base/progress.h"

namespace infer::cli {

class ConsoleProgress final : public ProgressReporter {
 public:
  explicit ConsoleProgress(bool terminal) : terminal_(terminal) {}
  void begin(std::string_view stage, int64_t total, std::string_view unit) override;
  void advance(int64_t done) override;
  void end() override;

 private:
  void draw(int64_t done);

  bool terminal_;
  std::string stage_, unit_;
  int64_t total_ = 0, done_ = 0;
  SteadyClock::time_point started_{}, drawn_{};
};

}  // namespace infer::cli
