// PTY text and finished subshells -> interrupts. The PTY adapter runs on the drain thread, so it
// reads at most the text ring's size a wake-up and never blocks on anything but the set's lock.
#include "tools_vfs/interrupt_sources.h"

#include <vector>

namespace infer::tools {

std::string pty_exit_line(const PtyStatus& s) {
  if (s.exited) return "[exited with status " + std::to_string(s.exit_code) + "]\n";
  if (s.signal != 0) return "[killed by signal " + std::to_string(s.signal) + "]\n";
  return "[ended, status unknown]\n";
}

void PtyInterrupts::raise_new_text(const PtyEvent& e, Follow& f) {
  const PtySet* ptys = ptys_.load();
  if (ptys == nullptr) return;
  std::string text, partial;
  uint64_t next = f.from;
  // The ring holds 64 KiB by default; four reads of max_read_bytes cover it and bound the work.
  for (int i = 0; i < 4; ++i) {
    Result<PtyRead> r = ptys->read_text(e.id, next, SIZE_MAX);
    if (!r) return;  // closed meanwhile: its kClosed follows
    if (r->skipped > 0) {
      text += "[... " + std::to_string(r->skipped) + " bytes of output overwritten ...]\n";
    }
    text += r->bytes;
    partial = r->partial_line;
    next = r->next;
    if (next >= r->end) break;
  }
  const bool exit_now = e.kind == PtyEvent::Kind::kExited && !f.exit_told;
  if (exit_now) text += pty_exit_line(e.status);
  if (text.empty() && partial == f.partial) return;  // a redraw, colours, a cursor move
  if (!interrupts_.raise({SourceKind::kPty, e.id}, text, partial)) {
    refused_.fetch_add(1);
    return;  // f.from unchanged: this text goes with the next raise
  }
  f.from = next;
  f.partial = std::move(partial);
  if (exit_now) f.exit_told = true;
}

void PtyInterrupts::on_event(const PtyEvent& e) {
  std::lock_guard lock(mu_);
  switch (e.kind) {
    case PtyEvent::Kind::kOutput:
    case PtyEvent::Kind::kExited:
      raise_new_text(e, follow_[e.id]);
      return;
    case PtyEvent::Kind::kClosed:
      follow_.erase(e.id);  // its live interrupt keeps what it had
      return;
  }
}

Result<InterruptId> raise_subshell_finished(InterruptSet& interrupts, uint64_t run,
                                            const SubshellResult& result) {
  return interrupts.raise({SourceKind::kSubshell, run}, render_result(result));
}

}  // namespace infer::tools
