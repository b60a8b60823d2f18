// Gives the terminal back when a signal ends infer while the line editor holds it: SIGTERM,
// SIGHUP or SIGQUIT at the prompt would otherwise leave it without echo and in bracketed paste
// mode. (Normal exits go through LineEditor's destructor.)
#pragma once

#include <signal.h>
#include <termios.h>

#include <iterator>

namespace infer::cli {

class TerminalGuard {
 public:
  // Saves stdin's terminal settings and installs the handlers; one guard at a time.
  TerminalGuard();
  // Puts the previous handlers back.
  ~TerminalGuard();
  TerminalGuard(const TerminalGuard&) = delete;
  TerminalGuard& operator=(const TerminalGuard&) = delete;

 private:
  static constexpr int kSignals[] = {SIGTERM, SIGHUP, SIGQUIT};
  struct sigaction previous_[std::size(kSignals)] = {};
  bool saved_ = false;
};

}  // namespace infer::cli
