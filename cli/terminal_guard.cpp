// The handler restores the settings saved at start and turns bracketed paste off (write and
// tcsetattr are async-signal-safe), then dies of the same signal.
#include "cli/terminal_guard.h"

#include <unistd.h>

#include <iterator>

namespace infer::cli {
namespace {

termios g_saved;
volatile sig_atomic_t g_have_saved = 0;

extern "C" void restore_and_die(int sig) {
  static const char kPasteOff[] = "\x1b[?2004l";
  [[maybe_unused]] const ssize_t n = write(STDOUT_FILENO, kPasteOff, sizeof kPasteOff - 1);
  if (g_have_saved) tcsetattr(STDIN_FILENO, TCSANOW, &g_saved);
  signal(sig, SIG_DFL);
  raise(sig);  // delivered when the handler returns: the default action, as without us
}

}  // namespace

TerminalGuard::TerminalGuard() {
  saved_ = tcgetattr(STDIN_FILENO, &g_saved) == 0;
  g_have_saved = saved_ ? 1 : 0;
  struct sigaction sa{};
  sa.sa_handler = restore_and_die;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &sa, &previous_[i]);
}

TerminalGuard::~TerminalGuard() {
  for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &previous_[i], nullptr);
  g_have_saved = 0;
}

}  // namespace infer::cli
