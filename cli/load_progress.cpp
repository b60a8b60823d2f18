#include "cli/load_progress.h"

#include <chrono>
#include <cstdio>

namespace infer::cli {
namespace {

// Redraws at most this often: a terminal repainted on every unit of a fast stage costs more
// than the stage.
constexpr auto kRedraw = std::chrono::milliseconds(100);
// A stage shorter than this leaves no line behind on a terminal (the load: line has the total).
constexpr double kWorthALine = 0.5;

}  // namespace

void ConsoleProgress::begin(std::string_view stage, int64_t total, std::string_view unit) {
  stage_ = stage;
  unit_ = unit;
  total_ = total;
  done_ = 0;
  started_ = SteadyClock::now();
  if (terminal_) {
    draw(0);
  } else if (total > 0) {
    std::fprintf(stderr, "infer: %s (%lld %s)\n", stage_.c_str(), (long long)total, unit_.c_str());
  } else {
    std::fprintf(stderr, "infer: %s\n", stage_.c_str());
  }
}

void ConsoleProgress::advance(int64_t done) {
  done_ = done;
  if (terminal_ && SteadyClock::now() - drawn_ >= kRedraw) draw(done);
}

void ConsoleProgress::end() {
  if (!terminal_) return;
  const double s = seconds_since(started_);
  if (s < kWorthALine) {
    std::fputs("\r\x1b[K", stderr);
  } else if (total_ > 0) {
    std::fprintf(stderr, "\r\x1b[Kinfer: %s: %lld %s in %.1f s\n", stage_.c_str(),
                 (long long)total_, unit_.c_str(), s);
  } else {
    std::fprintf(stderr, "\r\x1b[Kinfer: %s: %.1f s\n", stage_.c_str(), s);
  }
  std::fflush(stderr);
}

void ConsoleProgress::draw(int64_t done) {
  drawn_ = SteadyClock::now();
  if (total_ > 0) {
    std::fprintf(stderr, "\r\x1b[Kinfer: %s %lld/%lld %s (%.1f s)", stage_.c_str(), (long long)done,
                 (long long)total_, unit_.c_str(), seconds_since(started_));
  } else {
    std::fprintf(stderr, "\r\x1b[Kinfer: %s ...", stage_.c_str());
  }
  std::fflush(stderr);
}

}  // namespace infer::cli
