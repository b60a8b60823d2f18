// Progress of the long steps of a start (generating random weights, quantizing, uploading to the
// GPU): reported by the code that does them, drawn by the program that installed a reporter (the
// CLI: a live line on a terminal, a line a stage on a pipe). With no reporter nothing is drawn.
// Stages are begun, advanced and ended by the one thread that runs them, never nested.
#pragma once

#include <cstdint>
#include <string_view>

namespace infer {

class ProgressReporter {
 public:
  virtual ~ProgressReporter() = default;
  // `total` units of `unit` ("layers"); total 0: no count, only the stage's name.
  virtual void begin(std::string_view stage, int64_t total, std::string_view unit) = 0;
  virtual void advance(int64_t done) = 0;
  virtual void end() = 0;
};

namespace progress_detail {
inline ProgressReporter* reporter = nullptr;
}  // namespace progress_detail

// Set once at start (null: silent again). Not synchronized: install before the work begins.
inline void install_progress_reporter(ProgressReporter* r) { progress_detail::reporter = r; }

// One stage: begun on construction, ended on destruction (also on an early error return).
class ProgressStage {
 public:
  ProgressStage(std::string_view stage, int64_t total, std::string_view unit = {})
      : reporter_(progress_detail::reporter) {
    if (reporter_ != nullptr) reporter_->begin(stage, total, unit);
  }
  ~ProgressStage() {
    if (reporter_ != nullptr) reporter_->end();
  }
  ProgressStage(const ProgressStage&) = delete;
  ProgressStage& operator=(const ProgressStage&) = delete;
  void advance(int64_t done) {
    if (reporter_ != nullptr) reporter_->advance(done);
  }

 private:
  ProgressReporter* reporter_;
};

}  // namespace infer
