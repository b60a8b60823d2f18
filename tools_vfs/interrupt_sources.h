// Where interrupts come from (docs/TOOLS.md "Interrupts"): new text on a PTY, raised from the
// PtySet's drain thread as it arrives (no polling), and a finished subshell run.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "base/result.h"
#include "tools_vfs/interrupts.h"
#include "tools_vfs/pty_set.h"
#include "tools_vfs/subshell.h"

namespace infer::tools {

// Follows each PTY's text view from where it last raised and raises (or coalesces into) the
// PTY's interrupt with the new finished lines, the unfinished last line (a prompt) as its
// partial line; an exit adds a line saying how it ended. Output that only redraws or colours
// (no new text) raises nothing. Wiring, since the set takes its callback when it is created:
//   PtyInterrupts adapter(interrupts);
//   auto ptys = PtySet::create(root, limits, adapter.callback());
//   adapter.attach(ptys->get());
class PtyInterrupts {
 public:
  explicit PtyInterrupts(InterruptSet& interrupts) : interrupts_(interrupts) {}
  PtyEventCallback callback() {
    return [this](const PtyEvent& e) { on_event(e); };
  }
  // The set whose text is read; must outlive the events it sends (the set's destructor ends
  // them before it returns).
  void attach(const PtySet* ptys) { ptys_.store(ptys); }
  void on_event(const PtyEvent& e);

  // Raises the interrupt set refused (too many live): that text is raised again with the next.
  uint64_t refused() const { return refused_.load(); }

 private:
  struct Follow {
    uint64_t from = 0;    // text view offset not yet raised
    std::string partial;  // the partial line last raised
    bool exit_told = false;
  };
  void raise_new_text(const PtyEvent& e, Follow& f);

  InterruptSet& interrupts_;
  std::atomic<const PtySet*> ptys_{nullptr};
  std::mutex mu_;  // events come from one drain thread; the lock keeps a second set honest
  std::map<PtyId, Follow> follow_;
  std::atomic<uint64_t> refused_{0};
};

// "[exited with status 0]", "[killed by signal 9]", "[status unknown]".
std::string pty_exit_line(const PtyStatus& s);

// A finished subshell run as an interrupt of its own (source kSubshell, id `run`): the text the
// model reads for it (render_result).
Result<InterruptId> raise_subshell_finished(InterruptSet& interrupts, uint64_t run,
                                            const SubshellResult& result);

}  // namespace infer::tools
